package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/jackc/pgx/v5"
)

// startReplica runs another custos serve with g's configuration, its own
// data directory (holding a copy of g's gateway key: replicas answer as
// one agent) and the shared store.
func startReplica(t *testing.T, g *gatewayUnderTest, dataDir, storeURL string) *gatewayUnderTest {
	t.Helper()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(g.dataDir, "gateway.key.jwk.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "gateway.key.jwk.json"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &gatewayUnderTest{dataDir: dataDir, signer: g.signer, kid: g.kid, upstream: g.upstream, configPath: g.configPath}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	r.log = &errOut
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", g.configPath, "--data", dataDir, "--store", storeURL, "--listen", "127.0.0.1:0"},
			strings.NewReader(""), &out, &errOut)
	}()
	r.stop = func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("replica exit %d: %s", code, errOut.String())
		}
	}
	waitFor(t, &out, "the listening line", func(s string) bool {
		select {
		case code := <-done:
			t.Fatalf("replica exited %d: %s", code, errOut.String())
		default:
		}
		return strings.Contains(s, "Bearer ")
	})
	r.url = regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(out.String())[1]
	r.token = regexp.MustCompile(`Bearer ([0-9a-f]+)`).FindStringSubmatch(out.String())[1]
	return r
}

// Three replicas on one PostgreSQL schema: a request received by one is
// decided through all three at once; exactly one decision resolves it,
// the others get conflicts; the call runs once, whichever replica runs
// it; the audit log is one verifiable chain.
func TestServeReplicasOnPostgres(t *testing.T) {
	schema := pgtest.Schema(t)
	storeURL := pgtest.SchemaDSN(t, schema)
	first := startGateway(t, filepath.Join(t.TempDir(), "data0"), nil, "store: "+storeURL+"\n")
	replicas := []*gatewayUnderTest{first}
	for i := 1; i < 3; i++ {
		replicas = append(replicas, startReplica(t, first, filepath.Join(t.TempDir(), "data"+string(rune('0'+i))), storeURL))
	}
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()

	code, _, hdr := first.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "42.00"}, nil)
	if code != 202 {
		t.Fatalf("high-risk request: %d", code)
	}
	id := hdr.Get("Custos-Exchange")
	r := replicas[2].onlyPending(t) // created on replica 0, seen on replica 2
	var (
		mu       sync.Mutex
		outcomes = map[int]int{}
		wg       sync.WaitGroup
	)
	for i := range 100 {
		g := replicas[i%3]
		wg.Go(func() {
			v := aais.Approve
			if i%2 == 1 {
				v = aais.Deny
			}
			d, err := aais.NewDecision(&r, aais.DecisionParams{ID: "dec_" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Decision: v,
				Scope: aais.ScopeOnce, Actor: aais.Actor{ID: "x", Type: aais.ActorHuman}, DecidedAt: time.Now()})
			if err != nil {
				t.Error(err)
				return
			}
			m, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
			body, _ := aais.Marshal(m)
			req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/approvals/"+r.ID+"/decisions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+g.token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			outcomes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if outcomes[200] != 1 || outcomes[409] != 99 {
		t.Fatalf("100 decisions over 3 replicas: %v, want exactly one 200 and 99 conflicts", outcomes)
	}
	code, reply := replicas[1].awaitFinal(t, id)
	ran := int64(0)
	if code == 200 {
		ran = 1
	}
	time.Sleep(500 * time.Millisecond) // every replica's resumer has had its turn
	if reply["intent"] == nil || first.upstream.Load() != ran {
		t.Fatalf("final %d %v; the upstream ran %d times, want %d", code, reply, first.upstream.Load(), ran)
	}

	// A replica stopped with a request waiting: another replica finishes
	// it, once; the stopped one, restarted, does not run it again.
	code, _, hdr = replicas[2].send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "7.00"}, nil)
	if code != 202 {
		t.Fatalf("second request: %d", code)
	}
	replicas[2].stop()
	replicas[0].decide(t, aais.Approve)
	if c, _ := replicas[0].awaitFinal(t, hdr.Get("Custos-Exchange")); c != 200 {
		t.Fatalf("finished by another replica: %d", c)
	}
	before := first.upstream.Load()
	replicas[2] = startReplica(t, first, replicas[2].dataDir, storeURL)
	time.Sleep(500 * time.Millisecond)
	if first.upstream.Load() != before {
		t.Fatalf("the restarted replica ran the call again")
	}

	// Every replica records its heartbeat, which lets the others end the
	// calls it leaves executing if it dies (gateway.Options.ClaimLease).
	conn, err := pgx.Connect(t.Context(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var alive int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schema, "instances"}.Sanitize()+
		" WHERE seen_at > $1", time.Now().Add(-time.Minute).UnixNano()).Scan(&alive); err != nil || alive < 3 {
		t.Fatalf("%d replicas with a recent heartbeat, %v; want 3", alive, err)
	}

	// One chain, whoever wrote it, checked the way an operator would.
	var out, errOut syncBuffer
	if code := run(t.Context(), []string{"audit", "verify", "--log", storeURL}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("custos audit verify --log postgres://…: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	t.Logf("%s", out.String())
}
