package onboard_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/onboarding"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/onboard"
)

const (
	gatewayID = "agent:acme.gateway"
	agentID   = "agent:partner.assistant"
)

var testPolicy = []byte(`{"policy_version": "2026-q4", "token_lifetime_seconds": 900, "capabilities": [
  {"capability": "notes.read", "status": "allowed"},
  {"capability": "notes.write", "status": "oversight_required"},
  {"capability": "payments.charge", "status": "prohibited"},
  {"capability": "notes.archive", "status": "allowed", "max_risk_level": 3}]}`)

// agent is the external agent's well-known endpoints, with faults to
// inject, and the paths it was asked for.
type agent struct {
	t      *testing.T
	srv    *httptest.Server
	priv   ed25519.PrivateKey
	signer sig.Signer
	kid    string

	mu    sync.Mutex
	seen  []string
	class string
	// fault: discovery-404, identity-other-agent, identity-bad-sig,
	// identity-foreign-kid, redirect:<url>, audit-payload, audit-ok, slow
	fault string
	block chan struct{}
}

func newAgent(t *testing.T) *agent {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	a := &agent{t: t, priv: priv, kid: agentID + "#key-1", class: "limited-risk"}
	var err error
	if a.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		t.Fatal(err)
	}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *agent) set(fault string) {
	a.mu.Lock()
	a.fault = fault
	a.mu.Unlock()
}

func (a *agent) taken() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.seen
	a.seen = nil
	return s
}

var foreign = func() ed25519.PrivateKey { _, k, _ := ed25519.GenerateKey(rand.Reader); return k }()

func (a *agent) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.URL.Path)
	fault, class, block := a.fault, a.class, a.block
	a.mu.Unlock()
	if block != nil {
		<-block
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/.well-known/arsia":
		if fault == "discovery-404" {
			http.NotFound(w, r)
			return
		}
		if to, ok := strings.CutPrefix(fault, "redirect:"); ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"agent_id": agentID, "name": "assistant", "version": "1", "protocol_version": "1.0",
			"inbox": a.srv.URL + "/v1/arsia/inbox", "jwks": "/.well-known/arsia/jwks.json", "capabilities_supported": []string{"notes.read"}})
	case "/.well-known/arsia/identity":
		id := agentID
		if fault == "identity-other-agent" {
			id = "agent:partner.other"
		}
		body, _ := json.Marshal(map[string]any{"agent_id": id, "owner_id": "PT509876543", "owner_name": "Partner", "jurisdiction": "PT",
			"ai_system_classification": class, "contact_email": "ops@partner.example", "created_at": "2026-01-01T00:00:00.000Z"})
		body = append(body, '\n') // the signature covers the body as served
		key := a.priv
		if fault == "identity-bad-sig" {
			key = foreign
		}
		if fault == "identity-foreign-kid" {
			key = foreign // published in the JWKS, under another agent's kid
		}
		d := sha256.Sum256(body)
		w.Header().Set("X-ARSIA-Sig", base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, d[:])))
		_, _ = w.Write(body)
	case "/.well-known/arsia/jwks.json":
		keys := []jose.JSONWebKey{{Key: a.priv.Public(), KeyID: a.kid, Algorithm: "EdDSA", Use: "sig"}}
		if fault == "identity-foreign-kid" {
			keys = append(keys, jose.JSONWebKey{Key: foreign.Public(), KeyID: "agent:partner.other#key-1", Algorithm: "EdDSA", Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: keys})
	case "/.well-known/arsia/audit":
		switch fault {
		case "audit-payload":
			_ = json.NewEncoder(w).Encode([]any{map[string]any{"record_id": "x", "payload": map[string]any{"secret": 1}}})
		case "audit-ok":
			_ = json.NewEncoder(w).Encode([]any{})
		default:
			http.NotFound(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

// request is a signed onboarding request from the agent (signer, kid)
// asking for caps, at now.
func (a *agent) request(t *testing.T, signer sig.Signer, baseURL string, now time.Time, comp map[string]any, caps ...string) []byte {
	t.Helper()
	e, err := arsia.NewRequest(agentID, gatewayID, caps, onboarding.PayloadTypeRequest, map[string]any{"discovery_url": baseURL},
		arsia.BuildOptions{Now: now, Compliance: comp})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	if m, err = sig.Sign(m, signer, a.kid); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	return b
}

// fixture is a Service with recording callbacks.
type fixture struct {
	svc      *onboard.Service
	gwKeys   sig.KeySource
	mu       sync.Mutex
	recorded []onboard.Outcome
	active   map[string]onboard.Agent
	issued   [][]string
	jkts     []string
	issueErr error
	recErr   error
}

func newFixture(t *testing.T, prefixes []string, tweak func(*onboard.Options)) *fixture {
	t.Helper()
	_, gpriv, _ := ed25519.GenerateKey(rand.Reader)
	gs, _ := sig.NewEd25519Signer(gpriv.Seed())
	policy, err := onboarding.ParsePolicy(testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{active: map[string]onboard.Agent{},
		gwKeys: sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: gpriv.Public(), KeyID: gatewayID + "#gateway-1", Use: "sig"}}})}
	o := onboard.Options{Agent: gatewayID, Signer: gs, KID: gatewayID + "#gateway-1", Policy: policy, DiscoveryURLs: prefixes,
		FetchTimeout: 2 * time.Second,
		Record: func(_ context.Context, o onboard.Outcome) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.recErr != nil {
				return f.recErr
			}
			f.recorded = append(f.recorded, o)
			return nil
		},
		Activate: func(_ context.Context, a onboard.Agent) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if n := len(f.recorded); n == 0 || f.recorded[n-1].Agent != a.ID || f.recorded[n-1].Decision.Decision != "approved" {
				t.Errorf("%s activated before its approval was recorded", a.ID)
			}
			f.active[a.ID] = a
			return nil
		},
		Deactivate: func(_ context.Context, id string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.active, id)
			return nil
		},
		Issue: func(_ context.Context, id string, scope []string, jkt string, lifetime time.Duration) (onboard.Token, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.issueErr != nil {
				return onboard.Token{}, f.issueErr
			}
			f.issued = append(f.issued, scope)
			f.jkts = append(f.jkts, jkt)
			return onboard.Token{Value: "tok-" + id, ID: "jti", ExpiresAt: time.Now().Add(lifetime).Truncate(time.Second)}, nil
		}}
	// notes.archive's action is riskier (5) than the policy allows (3).
	o.RiskLevels = func() map[string]int { return map[string]int{"notes.archive": 5, "notes.read": 1} }
	if tweak != nil {
		tweak(&o)
	}
	if f.svc, err = onboard.New(o); err != nil {
		t.Fatal(err)
	}
	return f
}

// problem decodes a refusal's problem document.
func problem(t *testing.T, r onboard.Result) map[string]any {
	t.Helper()
	if r.Decision != nil {
		t.Fatalf("a decision where a refusal was expected: %s", r.Decision)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Problem, &m); err != nil {
		t.Fatalf("problem %q: %v", r.Problem, err)
	}
	return m
}

// decision checks a decision's signature and schema and returns its result.
func (f *fixture) decision(t *testing.T, r onboard.Result) (map[string]any, map[string]any) {
	t.Helper()
	if r.Status != 200 || r.Decision == nil {
		t.Fatalf("want a decision, got %d %s", r.Status, r.Problem)
	}
	env, err := sig.DecodeEnvelope(r.Decision)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sig.Verify(context.Background(), env, f.gwKeys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}}); err != nil {
		t.Fatalf("decision signature: %v", err)
	}
	if issues := arsia.ErrorIssues(arsia.Validate(env, arsia.ValidateOptions{Strict: true})); len(issues) > 0 {
		t.Fatalf("decision envelope invalid: %v", issues)
	}
	p, _ := env["payload"].(map[string]any)
	if err := onboarding.ValidateDecision(p); err != nil {
		t.Fatal(err)
	}
	res, _ := p["result"].(map[string]any)
	return env, res
}

func TestApproval(t *testing.T) {
	a := newAgent(t)
	a.set("audit-ok")
	f := newFixture(t, []string{a.srv.URL + "/"}, nil)
	req := a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read", "notes.write", "notes.delete")
	r := f.svc.Onboard(t.Context(), req, "")
	env, res := f.decision(t, r)
	want := []string{"/.well-known/arsia", "/.well-known/arsia/identity", "/.well-known/arsia/jwks.json", "/.well-known/arsia/audit"}
	if seen := a.taken(); !reflect.DeepEqual(seen, want) {
		t.Errorf("fetched %v, want %v in order", seen, want)
	}
	reqEnv, _ := sig.DecodeEnvelope(req)
	if env["intent"] != "approval_decision" || env["to"] != agentID || env["from"] != gatewayID || env["correlation_id"] != reqEnv["id"] {
		t.Errorf("decision envelope %v", env)
	}
	if res["decision"] != "approved" || res["token"] != "tok-"+agentID || res["policy_version"] != "2026-q4" ||
		!reflect.DeepEqual(res["freely_allowed"], []any{"notes.read"}) || !reflect.DeepEqual(res["oversight_required"], []any{"notes.write"}) ||
		!reflect.DeepEqual(res["effective_capabilities"], []any{"notes.read", "notes.write"}) {
		t.Errorf("result %v", res)
	}
	conf, _ := res["conformance_result"].(map[string]any)
	if conf["all_passed"] != true {
		t.Errorf("conformance %v", conf)
	}
	got := f.active[agentID]
	if got.URL != a.srv.URL || !reflect.DeepEqual(got.FreelyAllowed, []string{"notes.read"}) || !reflect.DeepEqual(got.OversightRequired, []string{"notes.write"}) {
		t.Errorf("activated %+v", got)
	}
	if !reflect.DeepEqual(f.issued, [][]string{{"notes.read", "notes.write"}}) {
		t.Errorf("token scopes %v", f.issued)
	}
	if len(f.recorded) != 1 {
		t.Fatalf("%d records", len(f.recorded))
	}
	rec := f.recorded[0]
	if !reflect.DeepEqual(rec.Steps, onboarding.Phase1Steps()) || !reflect.DeepEqual(rec.Phases, onboarding.Phases()) {
		t.Errorf("recorded steps %v phases %v", rec.Steps, rec.Phases)
	}
	if b, _ := json.Marshal(rec.Result); strings.Contains(string(b), "tok-") || rec.Result["decision"] != "approved" || rec.Result["token"] != nil {
		t.Errorf("the audited result %s: want the approval without its token", b)
	}
}

func TestReplayRefused(t *testing.T) {
	a := newAgent(t)
	seen := map[string]bool{}
	f := newFixture(t, []string{a.srv.URL + "/"}, func(o *onboard.Options) {
		o.Seen = func(_ context.Context, key string, until time.Time) (bool, error) {
			if until.Before(time.Now()) {
				t.Errorf("remembered %s until %v, in the past", key, until)
			}
			old := seen[key]
			seen[key] = true
			return old, nil
		}
	})
	req := a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read")
	if r := f.svc.Onboard(t.Context(), req, ""); r.Status != 200 {
		t.Fatalf("first: %d %s", r.Status, r.Problem)
	}
	r := f.svc.Onboard(t.Context(), req, "")
	if p := problem(t, r); r.Status != 409 {
		t.Errorf("replay: %d %v, want 409", r.Status, p)
	}
	if len(f.issued) != 1 || len(f.recorded) != 1 {
		t.Errorf("a replay issued %d tokens, recorded %d decisions; want 1 each", len(f.issued), len(f.recorded))
	}
	// A request that never authenticated is not remembered.
	_, ipriv, _ := ed25519.GenerateKey(rand.Reader)
	impostor, _ := sig.NewEd25519Signer(ipriv.Seed())
	n := len(seen)
	if r := f.svc.Onboard(t.Context(), a.request(t, impostor, a.srv.URL, time.Now(), nil, "notes.read"), ""); r.Status != 401 || len(seen) != n {
		t.Errorf("impostor: %d, remembered %d keys (was %d)", r.Status, len(seen), n)
	}
}

// A request with a DPoP proof gets a token bound to the proof's key; the
// proof is checked only once the request authenticated, and a proof the
// gateway refuses (or cannot check) onboards nothing.
func TestDPoPBinding(t *testing.T) {
	a := newAgent(t)
	var checked []string
	dpop := func(_ context.Context, proof string, _ time.Time) (string, error) {
		checked = append(checked, proof)
		if proof != "good-proof" {
			return "", errors.New("bad htu")
		}
		return "thumbprint-1", nil
	}
	f := newFixture(t, []string{a.srv.URL + "/"}, func(o *onboard.Options) { o.DPoP = dpop })
	if r := f.svc.Onboard(t.Context(), a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read"), "good-proof"); r.Status != 200 {
		t.Fatalf("with a good proof: %d %s", r.Status, r.Problem)
	}
	if !reflect.DeepEqual(f.jkts, []string{"thumbprint-1"}) {
		t.Errorf("tokens bound to %q, want thumbprint-1", f.jkts)
	}
	r := f.svc.Onboard(t.Context(), a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read"), "stale-proof")
	if p := problem(t, r); r.Status != 400 || len(f.jkts) != 1 || len(f.recorded) != 1 {
		t.Errorf("with a refused proof: %d %v, issued %d, recorded %d; want 400 and nothing more", r.Status, p, len(f.jkts), len(f.recorded))
	}
	_, ipriv, _ := ed25519.GenerateKey(rand.Reader)
	impostor, _ := sig.NewEd25519Signer(ipriv.Seed())
	n := len(checked)
	if r := f.svc.Onboard(t.Context(), a.request(t, impostor, a.srv.URL, time.Now(), nil, "notes.read"), "good-proof"); r.Status != 401 || len(checked) != n {
		t.Errorf("an unauthenticated request with a proof: %d, proofs checked %d (was %d); want 401, none checked", r.Status, len(checked), n)
	}
	bare := newFixture(t, []string{a.srv.URL + "/"}, nil)
	if r := bare.svc.Onboard(t.Context(), a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read"), "good-proof"); r.Status != 400 || len(bare.issued) != 0 {
		t.Errorf("a proof where none can be checked: %d, issued %d; want 400", r.Status, len(bare.issued))
	}
	a.taken()
}

func TestRefusalsBeforeAuthentication(t *testing.T) {
	a := newAgent(t)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Errorf("fetched outside the prefixes: %s", r.URL) }))
	defer other.Close()
	_, ipriv, _ := ed25519.GenerateKey(rand.Reader)
	impostor, _ := sig.NewEd25519Signer(ipriv.Seed())
	three := []any{"fetch_discovery", "fetch_identity_record", "fetch_jwks"}
	for _, tc := range []struct {
		name, fault string
		prefix      string
		base        string
		signer      sig.Signer
		status      int
		step        string
		denial      string
		completed   []any
		fetched     int
	}{
		{name: "outside the prefixes", prefix: a.srv.URL + "/agents/", status: 403, fetched: 0},
		{name: "dot segments out of the prefix", prefix: a.srv.URL + "/agents/", base: a.srv.URL + "/agents/../", status: 403},
		{name: "another host with the prefix's name in it", prefix: "http://127.0.0.1/", status: 403},
		{name: "discovery missing", fault: "discovery-404", status: 403, step: "fetch_discovery", denial: "discovery_failed", completed: []any{}, fetched: 1},
		{name: "redirect out of the prefixes", fault: "redirect:" + other.URL + "/.well-known/arsia", status: 403, step: "fetch_discovery", denial: "discovery_failed", fetched: 1},
		{name: "record of another agent", fault: "identity-other-agent", status: 403, step: "fetch_identity_record", denial: "identity_verification_failed", completed: three[:1], fetched: 2},
		{name: "record signature fails", fault: "identity-bad-sig", status: 403, step: "verify_identity_signature", denial: "identity_verification_failed", completed: three, fetched: 3},
		{name: "record signed under another agent's kid", fault: "identity-foreign-kid", status: 403, step: "check_kid_prefix", denial: "identity_verification_failed", fetched: 3},
		{name: "request signed by another key", signer: impostor, status: 401, fetched: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := a.srv.URL + "/"
			if tc.prefix != "" {
				prefix = tc.prefix
			}
			base := a.srv.URL
			if tc.base != "" {
				base = tc.base
			}
			signer := a.signer
			if tc.signer != nil {
				signer = tc.signer
			}
			a.set(tc.fault)
			f := newFixture(t, []string{prefix}, nil)
			r := f.svc.Onboard(t.Context(), a.request(t, signer, base, time.Now(), nil, "notes.read"), "")
			p := problem(t, r)
			seen := a.taken()
			if r.Status != tc.status || len(seen) != tc.fetched {
				t.Errorf("%d, fetched %v; want %d after %d fetches: %v", r.Status, seen, tc.status, tc.fetched, p)
			}
			if tc.step != "" && (p["failed_step"] != tc.step || p["denial_reason"] != tc.denial) {
				t.Errorf("problem %v, want step %s, reason %s", p, tc.step, tc.denial)
			}
			if tc.completed != nil && !reflect.DeepEqual(p["steps_completed"], tc.completed) && !(len(tc.completed) == 0 && p["steps_completed"] == nil) {
				t.Errorf("steps_completed %v, want %v", p["steps_completed"], tc.completed)
			}
			if len(f.recorded) != 0 || len(f.active) != 0 || len(f.issued) != 0 {
				t.Errorf("a refusal before authentication recorded %v, activated %v, issued %v", f.recorded, f.active, f.issued)
			}
		})
	}
}

func TestDenials(t *testing.T) {
	a := newAgent(t)
	for _, tc := range []struct {
		name, fault, class string
		comp               map[string]any
		caps               []string
		reason             string
		// failed is the conformance check that fails, if any.
		failed string
	}{
		{name: "unacceptable risk", class: "unacceptable-risk", caps: []string{"notes.read"}, reason: "unacceptable_risk_classification"},
		{name: "declares more than its record", comp: map[string]any{"profile": "EU-AI-ACT-HIGH-RISK", "ai_system_classification": "high-risk",
			"human_oversight": "required_before_execution", "explainability_required": true, "audit_required": true, "data_residency": "EU"},
			caps: []string{"notes.read"}, reason: "conformance_failed", failed: "CHECK-05"},
		{name: "audit trail with payloads", fault: "audit-payload", caps: []string{"notes.read"}, reason: "conformance_failed", failed: "CHECK-04"},
		{name: "nothing the policy lists", caps: []string{"notes.delete"}, reason: "no_permitted_capabilities"},
		{name: "a prohibited capability", caps: []string{"notes.read", "payments.charge"}},
		{name: "an action riskier than the policy allows", caps: []string{"notes.read", "notes.archive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.set(tc.fault)
			a.class = "limited-risk"
			if tc.class != "" {
				a.class = tc.class
			}
			f := newFixture(t, []string{a.srv.URL + "/"}, nil)
			_, res := f.decision(t, f.svc.Onboard(t.Context(), a.request(t, a.signer, a.srv.URL, time.Now(), tc.comp, tc.caps...), ""))
			a.taken()
			if res["decision"] != "denied" || res["token"] != nil || (tc.reason != "" && res["denial_reason"] != tc.reason) {
				t.Errorf("result %v, want denied (%s) without token", res, tc.reason)
			}
			if len(f.recorded) != 1 || len(f.active) != 0 || len(f.issued) != 0 {
				t.Fatalf("recorded %d, activated %v, issued %v; want the denial recorded only", len(f.recorded), f.active, f.issued)
			}
			if c := f.recorded[0].Conformance; tc.failed != "" && (c == nil || !reflect.DeepEqual(c.Failed(), []string{tc.failed})) {
				t.Errorf("conformance %+v, want %s failed", c, tc.failed)
			}
		})
	}
}

func TestFailuresGrantNothing(t *testing.T) {
	a := newAgent(t)
	for _, tc := range []struct {
		name       string
		issue, rec error
		// records are the outcomes recorded: the approval, then its
		// withdrawal.
		records []string
	}{
		{name: "token not issued", issue: errors.New("signing failed"), records: []string{"", "issuing the token: signing failed"}},
		{name: "decision not recorded", rec: errors.New("disk full")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []string{a.srv.URL + "/"}, nil)
			f.issueErr, f.recErr = tc.issue, tc.rec
			r := f.svc.Onboard(t.Context(), a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read"), "")
			a.taken()
			if p := problem(t, r); r.Status != 503 || r.RetryAfter <= 0 {
				t.Errorf("%d %v, want 503 with Retry-After", r.Status, p)
			}
			if len(f.active) != 0 {
				t.Errorf("still active: %v", f.active)
			}
			var got []string
			for _, o := range f.recorded {
				got = append(got, o.Withdrawn)
			}
			if !reflect.DeepEqual(got, tc.records) {
				t.Errorf("recorded %q, want %q", got, tc.records)
			}
		})
	}
}

func TestMalformedRequests(t *testing.T) {
	a := newAgent(t)
	f := newFixture(t, []string{a.srv.URL + "/"}, func(o *onboard.Options) {
		o.Configured = func(id string) bool { return id == "agent:partner.configured" }
	})
	stale := a.request(t, a.signer, a.srv.URL, time.Now().Add(-2*time.Hour), nil, "notes.read")
	wildcard := strings.Replace(string(a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read")), `"notes.read"`, `"notes.*"`, 1)
	for name, body := range map[string][]byte{
		"not JSON": []byte("{"), "an array": []byte("[]"), "stale": stale, "a pattern": []byte(wildcard),
		"no discovery_url": []byte(strings.Replace(string(a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read")), `"discovery_url"`, `"somewhere"`, 1)),
	} {
		r := f.svc.Onboard(t.Context(), body, "")
		if p := problem(t, r); r.Status != 400 {
			t.Errorf("%s: %d %v, want 400", name, r.Status, p)
		}
	}
	if seen := a.taken(); len(seen) != 0 {
		t.Errorf("malformed requests fetched %v", seen)
	}
}

func TestInFlightCap(t *testing.T) {
	a := newAgent(t)
	block := make(chan struct{})
	a.mu.Lock()
	a.block = block
	a.mu.Unlock()
	f := newFixture(t, []string{a.srv.URL + "/"}, func(o *onboard.Options) { o.MaxInFlight = 1 })
	done := make(chan onboard.Result)
	go func() {
		done <- f.svc.Onboard(context.Background(), a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read"), "")
	}()
	for deadline := time.Now().Add(5 * time.Second); ; {
		a.mu.Lock()
		n := len(a.seen)
		a.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first onboarding never fetched")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := f.svc.Onboard(t.Context(), a.request(t, a.signer, a.srv.URL, time.Now(), nil, "notes.read"), "")
	if problem(t, r); r.Status != 503 || r.RetryAfter <= 0 {
		t.Errorf("second onboarding: %d, want 503 with Retry-After", r.Status)
	}
	a.mu.Lock()
	a.block = nil
	a.mu.Unlock()
	close(block)
	if r := <-done; r.Status != 200 {
		t.Errorf("first onboarding: %d %s", r.Status, r.Problem)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"v":"1.0","id":"4f7d5c2e-8a3b-4b1e-9c6d-2f1e0a9b8c7d","ts":"2026-01-01T00:00:00.000Z","from":"agent:a.b","to":"agent:acme.gateway","intent":"request","capabilities":["notes.read"],"payload":{"type":"arsiaprotocol.onboarding/request","args":{"discovery_url":"https://x.example/"}}}`))
	policy, _ := onboarding.ParsePolicy(testPolicy)
	_, gpriv, _ := ed25519.GenerateKey(rand.Reader)
	gs, _ := sig.NewEd25519Signer(gpriv.Seed())
	nop := func(context.Context, onboard.Outcome) error { return nil }
	svc, err := onboard.New(onboard.Options{Agent: gatewayID, Signer: gs, KID: gatewayID + "#k", Policy: policy, DiscoveryURLs: []string{"https://x.example/"},
		Record: nop, Activate: func(context.Context, onboard.Agent) error { return nil }, Deactivate: func(context.Context, string) error { return nil },
		Issue: func(context.Context, string, []string, string, time.Duration) (onboard.Token, error) {
			return onboard.Token{}, nil
		}})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := svc.ParseRequest(body, now)
		if (r == nil) == (err == nil) {
			t.Fatalf("request %v with error %v", r, err)
		}
		if r != nil && (r.From == "" || r.BaseURL == "" || len(r.Requested) == 0) {
			t.Fatalf("accepted an incomplete request: %+v", r)
		}
	})
}
