package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/store"
)

// requestJSON is an approval.requested message for request id running
// command, offering approve once, approve for the session and deny.
func requestJSON(t *testing.T, id, command string, ttl time.Duration) string {
	t.Helper()
	now := time.Now()
	act, _ := json.Marshal(map[string]any{"kind": "process.exec", "name": "shell.exec",
		"summary": "Run " + command, "arguments": map[string]any{"command": command}})
	r, err := aais.NewRequest(aais.RequestParams{
		ID: id, CreatedAt: now, ExpiresAt: now.Add(ttl),
		Origin: aais.Origin{Harness: "cli-test", SessionID: "s-1"},
		Action: json.RawMessage(act),
		Risk:   aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Runs a command"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow node checks for the session",
				ScopeConstraints: aais.Constraints{"action_name": []byte(`"shell.exec"`), "command_prefix": []byte(`"node --check "`)}},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: now}, r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApprovalsCommands(t *testing.T) {
	for _, kind := range []string{"sqlite", "file", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var st string
			switch kind {
			case "sqlite":
				st = "--store=sqlite:" + filepath.Join(t.TempDir(), "approvals.db")
			case "file":
				st = "--store=file:" + filepath.Join(t.TempDir(), "approvals.json")
			case "postgres":
				st = "--store=" + postgresLocation(t)
			}
			step := func(stdin string, wantCode int, wantOut string, args ...string) string {
				t.Helper()
				code, out, errOut := custos(t, stdin, append([]string{"approvals", st}, args...)...)
				if code != wantCode || !strings.Contains(out+errOut, wantOut) {
					t.Fatalf("custos approvals %s: exit %d, want %d, output %q\nstdout: %s\nstderr: %s",
						strings.Join(args, " "), code, wantCode, wantOut, out, errOut)
				}
				return out
			}
			if kind != "postgres" {
				step("", 1, "no approval store at ", "list")
			}
			step(requestJSON(t, "apr_1", "node --check a.js", time.Hour), 0, "apr_1 recorded, pending (event 1)", "submit")
			step(requestJSON(t, "apr_1", "node --check a.js", time.Hour), 1, "already used by a different request", "submit", "-")
			step("", 0, "apr_1", "list")
			show := step("", 0, `"command": "node --check a.js"`, "show", "apr_1")
			if !strings.Contains(show, "State     pending") || !strings.Contains(show, "approve session") {
				t.Fatalf("show:\n%s", show)
			}
			step("", 2, "does not offer (approve, persistent)", "approve", "apr_1", "--scope", "persistent")
			step("", 1, "outcome stale", "approve", "apr_1", "--digest", "sha256:"+strings.Repeat("0", 64))
			// The stale answer burned the request.
			step("", 1, "outcome conflict", "approve", "apr_1")

			step(requestJSON(t, "apr_2", "node --check b.js", time.Hour), 0, "pending", "submit")
			step("", 0, "Outcome   approved (scope session)", "approve", "apr_2", "--scope", "session")
			rules := step("", 0, "session  active", "rules")
			ruleID := strings.Fields(strings.Split(rules, "\n")[1])[0]
			step(requestJSON(t, "apr_3", "node --check c.js", time.Hour), 0, "approved automatically by rule "+ruleID, "submit", "--wait")
			step(requestJSON(t, "apr_4", "rm -rf /", time.Hour), 0, "pending", "submit")
			step("", 0, ruleID+"  matches: approved because", "explain", "apr_3")
			step("", 0, `the command starts with "node --check " and no shell metacharacter follows`, "explain", "apr_3")
			step("", 0, ruleID+"  does not match: command_prefix: the command does not start with the prefix", "explain", "apr_4")
			step("", 1, "unknown request", "explain", "apr_nope")
			step("", 0, "Revoked rule "+ruleID, "revoke", ruleID)
			step("", 0, ruleID+"  does not match: the rule was revoked", "explain", "apr_3")
			step("", 0, "already revoked", "revoke", ruleID)
			step("", 0, "No rules.", "rules")
			step("", 0, "revoked by", "rules", "--all")
			step("", 1, "unknown approval rule", "revoke", "rul_nope")
			step(requestJSON(t, "apr_5", "node --check d.js", time.Hour), 0, "recorded, pending", "submit")
			step("", 0, "Outcome   denied", "deny", "apr_4")
			step("", 1, "unknown request", "show", "apr_nope")

			snap := step("", 0, `"type":"approval.snapshot"`, "snapshot")
			m, err := aais.Parse(bytes.TrimSpace([]byte(snap)))
			if err != nil || len(m.Snapshot.Pending) != 1 || m.Snapshot.Pending[0].ID != "apr_5" {
				t.Fatalf("snapshot %s: %v", snap, err)
			}
			list := step("", 0, "", "list", "--json")
			if lm, err := aais.Parse(bytes.TrimSpace([]byte(list))); err != nil || lm.Snapshot.AsOfSequence != m.Snapshot.AsOfSequence {
				t.Fatalf("list --json: %v", err)
			}

			// A waiter on a request that expires gets the expired receipt.
			step(requestJSON(t, "apr_6", "make", time.Second), 1, "outcome expired", "submit", "--wait")

			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
			var out, errOut bytes.Buffer
			if code := run(ctx, []string{"approvals", st, "watch", "--after", "0", "--json", "--interval", "20ms"}, strings.NewReader(""), &out, &errOut); code != 0 {
				t.Fatalf("watch: exit %d: %s", code, errOut.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			for i, l := range lines {
				m, err := aais.Parse([]byte(l))
				if err != nil || m.Sequence != uint64(i+1) {
					t.Fatalf("watch line %d: %v (%s)", i, err, l)
				}
			}
			if len(lines) < 10 {
				t.Fatalf("watch printed %d events", len(lines))
			}
		})
	}
}

// postgresLocation returns a store location in a new schema of the test
// database named by CUSTOS_TEST_POSTGRES_DSN, dropped after the test, or
// skips without it.
func postgresLocation(t *testing.T) string {
	dsn := os.Getenv("CUSTOS_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("CUSTOS_TEST_POSTGRES_DSN not set")
	}
	schema := fmt.Sprintf("custos_cli_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	})
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "custos_schema=" + schema
}

func TestApprovalsStoreLocation(t *testing.T) {
	code, _, errOut := custos(t, "", "approvals", "--store", "mysql://localhost/x", "list")
	if code != exitUsage || !strings.Contains(errOut, "unsupported location") {
		t.Fatalf("mysql store: exit %d, %s", code, errOut)
	}
}

// The data directory's rule (--data, $CUSTOS_DATA, ./custos-data) finds
// the store custos serve keeps; a command that only reads refuses a store
// that is not there, says where it looked and creates nothing.
func TestApprovalsDataDirectory(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	t.Setenv("CUSTOS_DATA", "")
	t.Setenv("CUSTOS_STORE", "")
	envDir := filepath.Join(work, "from-env")
	flagDir := filepath.Join(work, "from-flag")
	def := filepath.Join(work, "custos-data")
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		where string
	}{
		{"default", nil, nil, filepath.Join(def, "custos.db") + " (the data directory, the default ./custos-data)"},
		{"env", map[string]string{"CUSTOS_DATA": envDir}, nil, filepath.Join(envDir, "custos.db") + " (the data directory, $CUSTOS_DATA)"},
		{"flag over env", map[string]string{"CUSTOS_DATA": envDir}, []string{"--data", flagDir}, filepath.Join(flagDir, "custos.db") + " (the data directory, --data)"},
		{"--data over $CUSTOS_STORE", map[string]string{"CUSTOS_STORE": envDir}, []string{"--data", flagDir}, filepath.Join(flagDir, "custos.db") + " (the data directory, --data)"},
		{"$CUSTOS_STORE", map[string]string{"CUSTOS_STORE": filepath.Join(envDir, "x.db")}, nil, filepath.Join(envDir, "x.db") + " ($CUSTOS_STORE)"},
		{"--store", nil, []string{"--store", filepath.Join(flagDir, "x.db")}, filepath.Join(flagDir, "x.db") + " (--store)"},
		{"file store", nil, []string{"--store", filepath.Join(flagDir, "x.json")}, filepath.Join(flagDir, "x.json") + " (--store)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, sub := range [][]string{{"list"}, {"show", "apr_1"}, {"rules"}, {"snapshot"}, {"approve", "apr_1"}, {"sweep"}} {
				args := append(append([]string{"approvals"}, tc.args...), sub...)
				code, out, errOut := custos(t, "", args...)
				if code != exitFailure || out != "" || !strings.Contains(errOut, "no approval store at "+tc.where) {
					t.Errorf("%v: exit %d, stdout %q, stderr %q; want the place %s", sub, code, out, errOut, tc.where)
				}
			}
			if entries, _ := os.ReadDir(work); len(entries) != 0 {
				t.Fatalf("a reading command created %v", entries)
			}
		})
	}

	// serve's data directory, then list in the same directory: one rule.
	if code, _, errOut := custos(t, "", "approvals", "--data", "x", "--store", "y", "list"); code != exitUsage || !strings.Contains(errOut, "give one") {
		t.Errorf("--data and --store: exit %d, %s", code, errOut)
	}
	if code, _, errOut := custos(t, requestJSON(t, "apr_9", "node --check x.js", time.Hour), "approvals", "submit"); code != 0 {
		t.Fatalf("submit creates the store: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(def, "custos.db")); err != nil {
		t.Fatalf("submit did not create ./custos-data/custos.db: %v", err)
	}
	if code, out, errOut := custos(t, "", "approvals", "list"); code != 0 || !strings.Contains(out, "apr_") {
		t.Fatalf("list after submit: exit %d, %s%s", code, out, errOut)
	}
	// The older variable is named when it is what the user set.
	t.Setenv("CUSTOS_DATA_DIR", def)
	t.Chdir(t.TempDir())
	if code, _, errOut := custos(t, "", "approvals", "list"); code != exitFailure || !strings.Contains(errOut, "$CUSTOS_DATA_DIR is no longer read") {
		t.Errorf("CUSTOS_DATA_DIR: exit %d, %s", code, errOut)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until cond holds on the buffer's text; the test's own
// deadline bounds it.
func waitFor(t *testing.T, b *syncBuffer, what string, cond func(string) bool) {
	t.Helper()
	for !cond(b.String()) {
		select {
		case <-t.Context().Done():
			t.Fatalf("never saw %s; output:\n%s", what, b.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestApprovalsStdio(t *testing.T) {
	st := "--store=sqlite:" + filepath.Join(t.TempDir(), "approvals.db")
	reqJSON := requestJSON(t, "apr_1", "node --check a.js", time.Hour)
	if code, _, errOut := custos(t, reqJSON, "approvals", st, "submit"); code != 0 {
		t.Fatal(errOut)
	}
	m, err := aais.Parse([]byte(reqJSON))
	if err != nil {
		t.Fatal(err)
	}
	d, err := aais.NewDecision(m.Request, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce,
		Actor: aais.Actor{ID: "claimed-in-body", Type: aais.ActorHuman}, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	dm, err := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Stream: "presenter"}, d)
	if err != nil {
		t.Fatal(err)
	}
	decision, err := aais.Marshal(dm)
	if err != nil {
		t.Fatal(err)
	}

	stdinR, stdinW := io.Pipe()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), []string{"approvals", st, "stdio", "--interval", "10ms"}, stdinR, &out, &errOut)
	}()
	waitFor(t, &out, "the snapshot", func(s string) bool { return strings.Contains(s, `"approval.snapshot"`) })
	if _, err := io.WriteString(stdinW, "not json\n"+string(decision)+"\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "the receipt", func(s string) bool { return strings.Contains(s, `"outcome":"approved"`) })
	// A request recorded by another process shows up as an event.
	if code, _, e := custos(t, requestJSON(t, "apr_2", "make", time.Hour), "approvals", st, "submit"); code != 0 {
		t.Fatal(e)
	}
	waitFor(t, &out, "the new request", func(s string) bool { return strings.Contains(s, `"apr_2"`) })
	stdinW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("stdio exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "stdin line 1") {
		t.Fatalf("no diagnostic for the bad line: %q", errOut.String())
	}
	var v aais.View
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		m, err := aais.Parse([]byte(line))
		if err != nil {
			t.Fatalf("stdout line %d is not an AAIS message: %v", i+1, err)
		}
		if i == 0 {
			if err := v.Restore(m); err != nil {
				t.Fatalf("first line: %v", err)
			}
			continue
		}
		if m.Type == aais.TypeResolved && m.Resolution.Outcome == aais.OutcomeApproved && m.Resolution.DecisionID != d.ID {
			t.Fatalf("receipt for another decision: %s", line)
		}
		if _, err := v.Apply(m); err != nil {
			t.Fatalf("line %d does not apply in order: %v", i+1, err)
		}
	}
	if got := v.Pending(time.Now()); len(got) != 1 || got[0].ID != "apr_2" {
		t.Fatalf("presenter view after the stream: %v", got)
	}
}

// On the store of a gateway with a reviewer policy (the marker custos
// serve records with it), the commands that change the store refuse and
// name custos review; without a policy, or without a marker, they work as
// the local operator's. A marker that cannot be read refuses.
func TestApprovalsOnAGatewayStore(t *testing.T) {
	for _, kind := range []string{"sqlite", "file", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var spec string
			switch kind {
			case "sqlite":
				spec = "sqlite:" + filepath.Join(t.TempDir(), "approvals.db")
			case "file":
				spec = "file:" + filepath.Join(t.TempDir(), "approvals.json")
			case "postgres":
				spec = postgresLocation(t)
			}
			st := "--store=" + spec
			run := func(stdin string, args ...string) (int, string) {
				t.Helper()
				code, out, errOut := custos(t, stdin, append([]string{"approvals", st}, args...)...)
				return code, out + errOut
			}
			if code, out := run(requestJSON(t, "apr_1", "make", time.Hour), "submit"); code != 0 {
				t.Fatalf("submit before any gateway: %d %s", code, out)
			}
			cfg := config.Config{Store: spec, Agent: "agent:acme.gateway", Data: "/srv/custos", PublicURL: "https://custos.example",
				SeparationOfDuties: []string{"MIFID-II"}}
			if err := writeGatewayMarker(t.Context(), cfg); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"approve", "apr_1"}, {"deny", "apr_1"}, {"revoke", "rul_x"}, {"sweep"}} {
				code, out := run("", args...)
				if code == 0 || !strings.Contains(out, "CUSTOS_SERVER=https://custos.example") || !strings.Contains(out, "custos review") {
					t.Fatalf("%s on a gateway's store: %d %s", args[0], code, out)
				}
			}
			if code, out := run(requestJSON(t, "apr_2", "make", time.Hour), "submit"); code == 0 {
				t.Fatalf("submit on a gateway's store: %s", out)
			}
			if code, out := run("", "show", "apr_1"); code != 0 || !strings.Contains(out, "State     pending") {
				t.Fatalf("show: %d %s", code, out)
			}
			// The gateway restarted without a reviewer policy.
			cfg.SeparationOfDuties = nil
			if err := writeGatewayMarker(t.Context(), cfg); err != nil {
				t.Fatal(err)
			}
			if code, out := run("", "approve", "apr_1"); code != 0 || !strings.Contains(out, "approved") {
				t.Fatalf("approve without a policy: %d %s", code, out)
			}
			if kind == "postgres" {
				return
			}
			loc, err := store.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(store.ServeMarkerPath(loc), []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
			if code, out := run(requestJSON(t, "apr_3", "make", time.Hour), "submit"); code == 0 || !strings.Contains(out, "cannot be read") {
				t.Fatalf("submit with an unreadable marker: %d %s", code, out)
			}
		})
	}
}

// The marker is found however the store is named: through a symbolic
// link to its directory, or as the directory itself.
func TestGatewayMarkerThroughALink(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := custos(t, requestJSON(t, "apr_1", "make", time.Hour), "approvals", "--store", data, "submit"); code != 0 {
		t.Fatal(errOut)
	}
	if err := writeGatewayMarker(t.Context(), config.Config{Store: filepath.Join(data, "custos.db"), Roles: map[string]config.Role{"r": {All: true}}}); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Skip(err)
	}
	for _, s := range []string{data, link, filepath.Join(link, "custos.db"), "sqlite:" + filepath.Join(link, "custos.db")} {
		if code, _, errOut := custos(t, "", "approvals", "--store", s, "approve", "apr_1"); code == 0 || !strings.Contains(errOut, "custos review") {
			t.Errorf("--store %s: exit %d %s", s, code, errOut)
		}
	}
}

// quorumRequestJSON is a request that needs two approvals.
func quorumRequestJSON(t *testing.T, id string) string {
	t.Helper()
	now := time.Now()
	q, err := aais.Quorum{ApprovalsRequired: 2}.Extension()
	if err != nil {
		t.Fatal(err)
	}
	r, err := aais.NewRequest(aais.RequestParams{
		ID: id, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "cli-test", SessionID: "s-1"},
		Action: json.RawMessage(`{"kind":"process.exec","name":"shell.exec","summary":"Run the backup","arguments":{"command":"backup"}}`),
		Risk:   aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Runs a command"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
		Extensions: aais.Extensions{aais.QuorumExtension: q},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: now}, r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// custos approvals approve on a request that needs two approvals records
// one vote and says the request is still pending; the same user voting
// again counts nothing. A store that keeps no votes refuses the request.
func TestApprovalsQuorum(t *testing.T) {
	st := "--store=sqlite:" + filepath.Join(t.TempDir(), "approvals.db")
	if code, out, errOut := custos(t, quorumRequestJSON(t, "apr_q"), "approvals", st, "submit"); code != 0 {
		t.Fatalf("submit: %d %s %s", code, out, errOut)
	}
	code, out, errOut := custos(t, "", "approvals", st, "approve", "apr_q")
	if code != 0 || !strings.Contains(out, "Approval 1 of 2") || !strings.Contains(out, "still pending") {
		t.Fatalf("first approval: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := custos(t, "", "approvals", st, "approve", "apr_q"); code != 1 || !strings.Contains(out+errOut, "already voted") {
		t.Fatalf("second approval by the same user: %d %s %s", code, out, errOut)
	}
	file := "--store=file:" + filepath.Join(t.TempDir(), "approvals.json")
	if code, out, errOut := custos(t, quorumRequestJSON(t, "apr_q"), "approvals", file, "submit"); code == 0 || !strings.Contains(out+errOut, "cannot keep partial approvals") {
		t.Fatalf("submit to a file store: %d %s %s", code, out, errOut)
	}
}
