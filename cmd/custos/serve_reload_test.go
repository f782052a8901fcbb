package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/httpapi"
)

// reloadAgent is a sender with its own key in its own JWKS file.
type reloadAgent struct {
	id, kid, jwks string
	signer        sig.Signer
}

func newReloadAgent(t *testing.T, id string) reloadAgent {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a := reloadAgent{id: id, kid: id + "#key-1"}
	if a.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: a.kid, Algorithm: "EdDSA", Use: "sig"}}})
	a.jwks = filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(a.jwks, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return a
}

// reloadConfig is a configuration trusting and granting agents, with an
// echo handler and an http handler to upstream, and extra YAML.
func reloadConfig(data, upstream string, agents []reloadAgent, extra string) string {
	var files, senders []string
	for _, a := range agents {
		files = append(files, a.jwks)
		senders = append(senders, "  - agent: "+a.id+"\n    capabilities: [\"billing.*\", \"demo.*\"]\n")
	}
	return "listen: 127.0.0.1:0\ndata: " + data + "\nagent: agent:acme.gateway\n" +
		"trust:\n  jwks_files: [" + strings.Join(files, ", ") + "]\n" +
		"senders:\n" + strings.Join(senders, "") +
		"handlers:\n  demo.echo:\n    type: echo\n  billing.invoice.create:\n    type: http\n    url: " + upstream + "/invoices\n" + extra
}

// openReloadServer opens the server of the configuration at path in
// process and runs it until the test ends.
func openReloadServer(t *testing.T, path string) (*server, *syncBuffer) {
	t.Helper()
	cfg, err := loadServeConfig(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	s, err := openServer(t.Context(), cfg, io.Discard, &log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		s.Close()
	})
	return s, &log
}

// as is a gatewayUnderTest whose requests come from a.
func as(s *server, a reloadAgent, log *syncBuffer) *gatewayUnderTest {
	return &gatewayUnderTest{url: s.URL(), token: s.token, signer: a.signer, kid: a.kid, log: log}
}

// sendFrom signs a request from the agent from with g's key and posts it.
func sendFrom(t *testing.T, g *gatewayUnderTest, from, capability, profile string) (int, map[string]any, http.Header) {
	t.Helper()
	opts := arsia.BuildOptions{Now: time.Now()}
	if profile != "" {
		opts.Compliance = map[string]any{"profile": profile}
	}
	e, err := arsia.NewRequest(from, "agent:acme.gateway", []string{capability}, "com.acme/call", map[string]any{"amount": "1.00"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, g.signer, g.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(signed)
	return g.post(t, body, "application/arsia+json; v=1")
}

func TestServeReload(t *testing.T) {
	var upstreamCalls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"invoice":"inv-1"}`)
	}))
	defer up.Close()
	data := filepath.Join(t.TempDir(), "data")
	alice, bob := newReloadAgent(t, "agent:acme.alice"), newReloadAgent(t, "agent:acme.bob")
	path := filepath.Join(t.TempDir(), "custos.yaml")
	write := func(agents []reloadAgent, extra string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(reloadConfig(data, up.URL, agents, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (config.Config, error) { return loadServeConfig(path, nil, nil) }
	write([]reloadAgent{alice}, "")
	s, log := openReloadServer(t, path)
	ga, gb := as(s, alice, log), as(s, bob, log)

	// An event stream open across the reloads.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL()+"/approvals/events", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("event stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	events := bufio.NewReader(stream.Body)

	// A request waiting for a human before the reload.
	code, reply, hdr := sendFrom(t, ga, alice.id, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK")
	if code != 202 || reply["intent"] != "pending_approval" {
		t.Fatalf("before the reload: %d %v", code, reply)
	}
	id := hdr.Get("Custos-Exchange")
	if code, _, _ := sendFrom(t, gb, bob.id, "demo.echo", ""); code != 401 {
		t.Fatalf("bob before the reload: %d, want 401 (unknown key)", code)
	}

	// Bob is trusted and granted after the reload; a reviewer is added.
	token := "reviewer-token-0123456789"
	write([]reloadAgent{alice, bob}, "reviewers:\n  - id: carol\n    token_sha256: \""+httpapi.TokenHash(token)+"\"\n")
	if restart, err := s.ReloadFrom(load, "test"); err != nil || len(restart) != 0 {
		t.Fatalf("reload: %v %v", restart, err)
	}
	if code, reply, _ := sendFrom(t, gb, bob.id, "demo.echo", ""); code != 200 {
		t.Fatalf("bob after the reload: %d %v", code, reply)
	}
	// The request pending across the reload is decided and runs.
	carol := &gatewayUnderTest{url: s.URL(), token: token, log: log}
	carol.decide(t, aais.Approve)
	if code, final := ga.awaitFinal(t, id); code != 200 || upstreamCalls.Load() != 1 {
		t.Fatalf("the pending request after the reload: %d %v (upstream %d)", code, final, upstreamCalls.Load())
	}
	// The stream opened before the reload carried the decision.
	readUntil(t, events, "event: approval.resolved")

	// Alice is removed: refused.
	write([]reloadAgent{bob}, "")
	if _, err := s.ReloadFrom(load, "test"); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := sendFrom(t, ga, alice.id, "demo.echo", ""); code != 401 {
		t.Fatalf("alice after her removal: %d, want 401", code)
	}
	// Carol's token went with her.
	if code := getWith(t, s.URL()+"/approvals/snapshot", token); code != 401 {
		t.Fatalf("a removed reviewer's token: %d, want 401", code)
	}

	// An invalid configuration is refused and the one in force kept.
	if err := os.WriteFile(path, []byte(reloadConfig(data, up.URL, []reloadAgent{alice}, "handlers:\n  x.y:\n    type: bogus\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReloadFrom(load, "test"); err == nil {
		t.Fatal("an invalid configuration was accepted")
	}
	write([]reloadAgent{alice}, "handlers:\n  demo.more:\n    type: http\n    url: \"https://[::1\"\n")
	if _, err := s.ReloadFrom(load, "test"); err == nil {
		t.Fatal("a configuration whose handler does not build was accepted")
	}
	if code, _, _ := sendFrom(t, gb, bob.id, "demo.echo", ""); code != 200 {
		t.Fatalf("bob after refused reloads: %d", code)
	}
	if code, _, _ := sendFrom(t, ga, alice.id, "demo.echo", ""); code != 401 {
		t.Fatalf("alice after refused reloads: %d, want 401", code)
	}
	if !strings.Contains(log.String(), "configuration reload refused") {
		t.Errorf("no refusal logged:\n%s", log.String())
	}

	// Settings that need a restart are reported and left alone (public_url
	// follows listen).
	if err := os.WriteFile(path, []byte(strings.Replace(reloadConfig(data, up.URL, []reloadAgent{bob}, "max_body: 2048\n"),
		"listen: 127.0.0.1:0", "listen: 127.0.0.1:1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	restart, err := s.ReloadFrom(load, "test")
	if err != nil || strings.Join(restart, ",") != "listen,public_url,max_body" {
		t.Fatalf("needs restart: %v %v", restart, err)
	}
	if s.cfg.Listen != "127.0.0.1:0" || s.cfg.MaxBody != config.DefaultMaxBody {
		t.Fatalf("a restart setting changed: %s %d", s.cfg.Listen, s.cfg.MaxBody)
	}

	// The metrics count both results.
	mfs, _ := (&gatewayUnderTest{url: s.URL()}).scrape(t, "", "")
	counts := map[string]float64{}
	if mf := mfs["custos_config_reloads_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if counts["ok"] != 3 || counts["error"] != 2 {
		t.Errorf("custos_config_reloads_total: %v, want ok 3, error 2", counts)
	}
	if mf := mfs["custos_config_last_reload_success_timestamp_seconds"]; mf == nil || mf.GetMetric()[0].GetGauge().GetValue() < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("custos_config_last_reload_success_timestamp_seconds: %v", mf)
	}
}

// TestServeReloadUnderLoad reloads while requests run (go test -race).
func TestServeReloadUnderLoad(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	alice, bob := newReloadAgent(t, "agent:acme.alice"), newReloadAgent(t, "agent:acme.bob")
	path := filepath.Join(t.TempDir(), "custos.yaml")
	configs := []string{reloadConfig(data, "http://127.0.0.1:9", []reloadAgent{alice}, ""),
		reloadConfig(data, "http://127.0.0.1:9", []reloadAgent{alice, bob}, "roles:\n  ops:\n    all: true\n")}
	if err := os.WriteFile(path, []byte(configs[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	s, log := openReloadServer(t, path)
	ga := as(s, alice, log)
	var wg sync.WaitGroup
	var failures atomic.Int64
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Alice is in both configurations: always served.
				if code, _, _ := sendFrom(t, ga, alice.id, "demo.echo", ""); code != 200 {
					failures.Add(1)
				}
				if code := getWith(t, s.URL()+"/approvals/snapshot", s.token); code != 200 {
					failures.Add(1)
				}
			}
		}()
	}
	for i := range 20 {
		if err := os.WriteFile(path, []byte(configs[i%2]), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReloadFrom(func() (config.Config, error) { return loadServeConfig(path, nil, nil) }, "test"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d requests failed during the reloads:\n%s", n, log.String())
	}
}

// TestServeReloadsOnFileChangeAndSIGHUP runs custos serve through its
// command line: an edited configuration file is reloaded on its own, and
// a real SIGHUP sent to this process reloads it through signal.Notify.
func TestServeReloadsOnFileChangeAndSIGHUP(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer func() { g.stop() }()
	bob := newReloadAgent(t, "agent:acme.bob")
	b, err := os.ReadFile(g.configPath)
	if err != nil {
		t.Fatal(err)
	}
	gb := &gatewayUnderTest{url: g.url, token: g.token, signer: bob.signer, kid: bob.kid, log: g.log}
	if code, _, _ := sendFrom(t, gb, bob.id, "demo.echo", ""); code != 401 {
		t.Fatalf("bob before the edit: %d", code)
	}
	cfg := strings.Replace(string(b), "  jwks_files: [", "  jwks_files: ["+bob.jwks+", ", 1)
	cfg = strings.Replace(cfg, "senders:\n", "senders:\n  - agent: "+bob.id+"\n    capabilities: [\"demo.*\"]\n", 1)
	// Written as editors do: a new file renamed over the old one.
	tmp := g.configPath + ".new"
	if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, g.configPath); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g.log, "the reload of the edited file", func(s string) bool {
		return strings.Contains(s, `msg="configuration reloaded" trigger=file`)
	})
	if code, reply, _ := sendFrom(t, gb, bob.id, "demo.echo", ""); code != 200 {
		t.Fatalf("bob after the edit: %d %v", code, reply)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g.log, "the reload on SIGHUP", func(s string) bool {
		return strings.Contains(s, `msg="configuration reloaded" trigger=SIGHUP`)
	})
	if code, reply, _ := sendFrom(t, gb, bob.id, "demo.echo", ""); code != 200 {
		t.Fatalf("bob after SIGHUP: %d %v", code, reply)
	}
}

func getWith(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// readUntil reads the event stream until a line contains want (a stream
// that never says it fails the test rather than hang it).
func readUntil(t *testing.T, r *bufio.Reader, want string) {
	t.Helper()
	var seen strings.Builder
	found := make(chan error, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			seen.WriteString(line)
			if strings.Contains(line, want) {
				found <- nil
				return
			}
			if err != nil {
				found <- err
				return
			}
		}
	}()
	select {
	case err := <-found:
		if err != nil {
			t.Fatalf("the stream ended (%v) before %q:\n%s", err, want, seen.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the stream never said %q", want)
	}
}

func TestServeCheckConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "custos.yaml")
	t.Setenv("CUSTOS_TEST_CRM_TOKEN", "Bearer crm-secret-value")
	valid := "data: " + filepath.Join(dir, "data") + "\nstore: postgres://custos:db-password@db.internal/custos\n" +
		"handlers:\n  crm.get:\n    type: http\n    url: https://crm.internal/get\n    headers:\n      Authorization: env:CUSTOS_TEST_CRM_TOKEN\n      X-Api-Key: inline-api-key\n" +
		"reviewers:\n  - id: carol\n    password_hash: \"$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$aGFzaGhhc2hoYXNoaGFzaA\"\n"
	if err := os.WriteFile(path, []byte(valid), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := custos(t, "", "serve", "--config", path, "--check-config")
	if code != 0 {
		t.Fatalf("valid: exit %d: %s", code, errOut)
	}
	for _, secret := range []string{"db-password", "inline-api-key", "crm-secret-value", "aGFzaGhhc2hoYXNoaGFzaA"} {
		if strings.Contains(out, secret) {
			t.Errorf("the printed configuration holds %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"Authorization: env:CUSTOS_TEST_CRM_TOKEN", "X-Api-Key: REDACTED", "postgres://custos:REDACTED@db.internal/custos", "crm.get:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the printed configuration lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("--check-config created the data directory (%v)", err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"handlers:\n  crm.get:\n    type: http\n    url: https://crm.internal/get\n    headers: {Authorization: 'env:CUSTOS_TEST_UNSET_VAR'}\n", "CUSTOS_TEST_UNSET_VAR is not set"},
		{"tokens: {accept_any_jti: maybe}\n", "line 1: cannot unmarshal !!str `maybe` into bool"},
		{"listen: 127.0.0.1:99999\n", "listen"},
	} {
		if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := custos(t, "", "serve", "--config", path, "--check-config")
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %s; want an error naming %q", tc.yaml, code, errOut, tc.want)
		}
	}
}

// TestServeReloadRotatedSecretFile: a handler whose configuration is
// unchanged but whose file: secret was rotated is rebuilt by a reload.
func TestServeReloadRotatedSecretFile(t *testing.T) {
	var seen atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	alice := newReloadAgent(t, "agent:acme.alice")
	secret := filepath.Join(t.TempDir(), "upstream-token")
	if err := os.WriteFile(secret, []byte("Bearer first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "custos.yaml")
	cfg := reloadConfig(filepath.Join(t.TempDir(), "data"), up.URL, []reloadAgent{alice}, "") +
		"    headers:\n      Authorization: file:" + secret + "\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s, log := openReloadServer(t, path)
	ga := as(s, alice, log)
	if code, reply, _ := sendFrom(t, ga, alice.id, "billing.invoice.create", ""); code != 200 || seen.Load() != "Bearer first" {
		t.Fatalf("before: %d %v, upstream saw %v", code, reply, seen.Load())
	}
	if err := os.WriteFile(secret, []byte("Bearer second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReloadFrom(func() (config.Config, error) { return loadServeConfig(path, nil, nil) }, "test"); err != nil {
		t.Fatal(err)
	}
	if code, reply, _ := sendFrom(t, ga, alice.id, "billing.invoice.create", ""); code != 200 || seen.Load() != "Bearer second" {
		t.Fatalf("after: %d %v, upstream saw %v", code, reply, seen.Load())
	}
}

// A gateway on port 0 with no public_url tells senders the port it got:
// its discovery document names a reachable inbox and JWKS, and a reload
// of the same file does not report public_url as changed.
func TestServeOnPortZeroPublishesItsPort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "custos.yaml")
	if err := os.WriteFile(path, []byte(reloadConfig(filepath.Join(dir, "data"), "http://127.0.0.1:9", nil, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := openReloadServer(t, path)
	if strings.HasSuffix(s.cfg.PublicURL, ":0") || s.cfg.PublicURL != s.URL() {
		t.Fatalf("public URL %q, server at %q", s.cfg.PublicURL, s.URL())
	}
	resp, err := http.Get(s.URL() + "/.well-known/arsia")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(md)
	if !strings.Contains(string(b), s.URL()+"/v1/arsia/inbox") || strings.Contains(string(b), "127.0.0.1:0") {
		t.Fatalf("discovery document does not name the listening address %s: %s", s.URL(), b)
	}
	cfg, err := loadServeConfig(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if restart, err := s.Reload(cfg, "test"); err != nil || len(restart) != 0 {
		t.Fatalf("reload of the same file: needs restart %v, %v", restart, err)
	}
}

// The discovery document lists the capabilities the gateway serves now,
// in a stable order: a handler added by a reload is published without a
// restart.
func TestServeDiscoveryFollowsReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "custos.yaml")
	write := func(extra string) {
		if err := os.WriteFile(path, []byte(reloadConfig(filepath.Join(dir, "data"), "http://127.0.0.1:9", nil, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	s, _ := openReloadServer(t, path)
	caps := func() []string {
		resp, err := http.Get(s.URL() + "/.well-known/arsia")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var md struct {
			Caps []string `json:"capabilities_supported"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
			t.Fatal(err)
		}
		return md.Caps
	}
	if got := caps(); !slices.Equal(got, []string{"billing.invoice.create", "demo.echo"}) {
		t.Fatalf("before the reload: %v", got)
	}
	write("  alpha.ping:\n    type: echo\n")
	if _, err := s.ReloadFrom(func() (config.Config, error) { return loadServeConfig(path, nil, nil) }, "test"); err != nil {
		t.Fatal(err)
	}
	if got := caps(); !slices.Equal(got, []string{"alpha.ping", "billing.invoice.create", "demo.echo"}) {
		t.Fatalf("after the reload: %v", got)
	}
}
