package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/store/memstore"
)

type submitEnv struct {
	srv  *httptest.Server
	auth *aais.Authority
}

// newSubmitEnv mounts NewSubmit next to NewApprovals as custos serve does.
func newSubmitEnv(t *testing.T) *submitEnv {
	t.Helper()
	return newSubmitEnvWith(t, nil)
}

// newSubmitEnvWith is newSubmitEnv with an authority holding remember
// policy p (none when nil).
func newSubmitEnvWith(t *testing.T, p aais.RememberPolicy) *submitEnv {
	t.Helper()
	s := memstore.New()
	a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Remember: p})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := NewTokens(map[string]aais.Actor{TokenHash(token): {ID: "proxy", Type: aais.ActorPolicy}})
	if err != nil {
		t.Fatal(err)
	}
	approvals, err := NewApprovals(ApprovalsOptions{Authority: a, Store: s, Auth: toks})
	if err != nil {
		t.Fatal(err)
	}
	submit, err := NewSubmit(SubmitOptions{Authority: a, Auth: toks, MaxWait: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/", approvals)
	mux.Handle("/approvals/requests", submit)
	mux.Handle("/approvals/requests/", submit)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &submitEnv{srv: srv, auth: a}
}

func (e *submitEnv) do(t *testing.T, method, path, body, tok string) (int, *aais.Message, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted {
		m, err := aais.Parse(b)
		if err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
		return resp.StatusCode, m, string(b)
	}
	return resp.StatusCode, nil, string(b)
}

type reqOpts struct {
	harness, run string
	session      bool
	persistent   bool
	ext          aais.Extensions
	content      string
}

func submitRequest(t *testing.T, o reqOpts) (*aais.Request, string) {
	t.Helper()
	if o.harness == "" {
		o.harness = "custos-mcp-proxy"
	}
	if o.content == "" {
		o.content = "x"
	}
	name, _ := json.Marshal("write_file")
	choices := []aais.Choice{
		{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
		{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
	}
	if o.session {
		choices = append(choices, aais.Choice{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow for the session",
			ScopeConstraints: aais.Constraints{"action_name": name}})
	}
	if o.persistent {
		choices = append(choices, aais.Choice{Decision: aais.Approve, Scope: aais.ScopePersistent, Label: "Always allow",
			ScopeConstraints: aais.Constraints{"action_name": name}})
	}
	now := time.Now().UTC()
	req, err := aais.NewRequest(aais.RequestParams{CreatedAt: now, ExpiresAt: now.Add(time.Minute),
		Origin: aais.Origin{Harness: o.harness, SessionID: "mcp-1", RunID: o.run},
		Action: json.RawMessage(`{"kind":"tool.call","name":"write_file","summary":"Write","arguments":{"path":"/tmp/a","content":"` + o.content + `"}}`),
		Risk:   aais.Risk{Level: aais.RiskMedium, Reasons: []string{"test"}}, Choices: choices, Extensions: o.ext})
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: now, Stream: "proxy"}, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return req, string(b)
}

func approve(t *testing.T, a *aais.Authority, req *aais.Request, s aais.Scope) {
	t.Helper()
	actor := aais.Actor{ID: "alice", Type: aais.ActorHuman}
	d, err := aais.NewDecision(req, aais.DecisionParams{Decision: aais.Approve, Scope: s, Actor: actor, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := a.Decide(context.Background(), d, actor, nil); err != nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("decide: %v %+v", err, m)
	}
}

func TestSubmitWaitAndReceipt(t *testing.T) {
	e := newSubmitEnv(t)
	req, body := submitRequest(t, reqOpts{})
	if status, _, _ := e.do(t, "POST", "/approvals/requests", body, ""); status != http.StatusUnauthorized {
		t.Fatalf("no token: %d", status)
	}
	if status, _, _ := e.do(t, "POST", "/approvals/requests", body, "wrong"); status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", status)
	}
	status, m, raw := e.do(t, "POST", "/approvals/requests", body, token)
	if status != http.StatusAccepted || m.Type != aais.TypeRequested || m.Request.ID != req.ID || m.Request.ActionDigest != req.ActionDigest {
		t.Fatalf("submit: %d %s", status, raw)
	}
	// The reviewers see it.
	if status, m, _ := e.do(t, "GET", "/approvals/snapshot", "", token); status != http.StatusOK || len(m.Snapshot.Pending) != 1 {
		t.Fatalf("snapshot: %d %+v", status, m)
	}
	if status, m, _ := e.do(t, "GET", "/approvals/requests/"+req.ID+"?wait=50ms", "", token); status != http.StatusAccepted || m.Type != aais.TypeRequested {
		t.Fatalf("pending state: %d", status)
	}
	// A long poll returns as soon as the request is decided.
	go func() {
		time.Sleep(100 * time.Millisecond)
		approve(t, e.auth, req, aais.ScopeOnce)
	}()
	start := time.Now()
	status, m, raw = e.do(t, "GET", "/approvals/requests/"+req.ID+"?wait=60s", "", token)
	if status != http.StatusOK || m.Type != aais.TypeResolved || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("long poll: %d %s", status, raw)
	}
	// Resolved, and well before its wait ran out: the decision ended it.
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the long poll took %s", d)
	}
	// Submitting the same request again changes nothing.
	if status, m, _ := e.do(t, "POST", "/approvals/requests", body, token); status != http.StatusOK || m.Type != aais.TypeResolved {
		t.Fatalf("resubmit: %d", status)
	}
	if status, _, _ := e.do(t, "GET", "/approvals/requests/apr_nope", "", token); status != http.StatusNotFound {
		t.Fatalf("unknown: %d", status)
	}
	if status, _, _ := e.do(t, "GET", "/approvals/requests/"+req.ID+"?wait=soon", "", token); status != http.StatusBadRequest {
		t.Fatalf("bad wait: %d", status)
	}
}

func TestSubmitSessionRuleApprovesAtOnce(t *testing.T) {
	e := newSubmitEnv(t)
	first, body := submitRequest(t, reqOpts{session: true})
	if status, _, raw := e.do(t, "POST", "/approvals/requests", body, token); status != http.StatusAccepted {
		t.Fatalf("first: %d %s", status, raw)
	}
	approve(t, e.auth, first, aais.ScopeSession)
	_, body = submitRequest(t, reqOpts{session: true, content: "y"})
	status, m, raw := e.do(t, "POST", "/approvals/requests", body, token)
	if status != http.StatusOK || m.Resolution.Outcome != aais.OutcomeApproved || m.Resolution.EffectiveScope != aais.ScopeSession {
		t.Fatalf("second: %d %s", status, raw)
	}
}

func TestSubmitRefusals(t *testing.T) {
	e := newSubmitEnv(t)
	exch, _ := json.Marshal(map[string]string{"exchange_id": "x_1", "profile": "MIFID-II"})
	_, persistent := submitRequest(t, reqOpts{persistent: true})
	_, reserved := submitRequest(t, reqOpts{harness: "custos"})
	_, exchange := submitRequest(t, reqOpts{ext: aais.Extensions{ExchangeExtension: exch}})
	for name, c := range map[string]struct {
		body string
		want int
	}{
		"persistent": {persistent, http.StatusBadRequest},
		"reserved":   {reserved, http.StatusBadRequest},
		"exchange":   {exchange, http.StatusBadRequest},
		"not aais":   {`{"aais":"1.0"}`, http.StatusBadRequest},
	} {
		if status, _, raw := e.do(t, "POST", "/approvals/requests", c.body, token); status != c.want {
			t.Errorf("%s: %d %s", name, status, raw)
		}
	}
	// A profile alone is allowed (the reviewer policy reads it).
	prof, _ := json.Marshal(map[string]string{"profile": "MIFID-II"})
	_, ok := submitRequest(t, reqOpts{ext: aais.Extensions{ExchangeExtension: prof}})
	if status, _, raw := e.do(t, "POST", "/approvals/requests", ok, token); status != http.StatusAccepted {
		t.Errorf("profile: %d %s", status, raw)
	}
	// The same id with other content is a conflict.
	req, body := submitRequest(t, reqOpts{})
	if status, _, _ := e.do(t, "POST", "/approvals/requests", body, token); status != http.StatusAccepted {
		t.Fatal(status)
	}
	m, err := aais.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	changed, err := aais.NewRequest(aais.RequestParams{ID: req.ID, CreatedAt: time.Now().UTC(), Origin: m.Request.Origin,
		Action: json.RawMessage(`{"kind":"tool.call","name":"write_file","summary":"Write","arguments":{"content":"z"}}`),
		Risk:   m.Request.Risk, Choices: m.Request.Choices})
	if err != nil {
		t.Fatal(err)
	}
	cm, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Stream: "proxy"}, changed)
	other, _ := aais.Marshal(cm)
	if status, _, raw := e.do(t, "POST", "/approvals/requests", string(other), token); status != http.StatusConflict {
		t.Errorf("conflict: %d %s", status, raw)
	}
	// Content type.
	r, _ := http.NewRequest("POST", e.srv.URL+"/approvals/requests", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("content type: %d", resp.StatusCode)
	}
}

func TestSubmitWithdraw(t *testing.T) {
	e := newSubmitEnv(t)
	req, body := submitRequest(t, reqOpts{run: "call-1"})
	if status, _, _ := e.do(t, "POST", "/approvals/requests", body, token); status != http.StatusAccepted {
		t.Fatal(status)
	}
	status, m, raw := e.do(t, "POST", "/approvals/requests/"+req.ID+"/withdraw", "{}", token)
	if status != http.StatusOK || m.Resolution.Outcome != aais.OutcomeCancelled {
		t.Fatalf("withdraw: %d %s", status, raw)
	}
	norun, body := submitRequest(t, reqOpts{})
	if status, _, _ := e.do(t, "POST", "/approvals/requests", body, token); status != http.StatusAccepted {
		t.Fatal(status)
	}
	if status, _, raw := e.do(t, "POST", "/approvals/requests/"+norun.ID+"/withdraw", "{}", token); status != http.StatusConflict {
		t.Fatalf("withdraw without run: %d %s", status, raw)
	}
}

// With a remember policy, a submitted request may offer a persistent
// choice the policy allows, and only that; the rule it saves approves a
// later request, says why, and stops at its revocation.
func TestSubmitPersistentByPolicy(t *testing.T) {
	session := &aais.RememberRules{Rules: []aais.RememberRule{{Capabilities: []string{"write_file"}, Scopes: []aais.Scope{aais.ScopeSession}}}}
	e := newSubmitEnvWith(t, session)
	_, body := submitRequest(t, reqOpts{persistent: true})
	status, _, raw := e.do(t, "POST", "/approvals/requests", body, token)
	if status != http.StatusBadRequest || !strings.Contains(raw, "a persistent approval of write_file is refused: by remember policy entry 1 only session approvals may be remembered") {
		t.Fatalf("persistent under a session-only policy: %d %s", status, raw)
	}

	e = newSubmitEnvWith(t, &aais.RememberRules{Rules: []aais.RememberRule{{Capabilities: []string{"write_*"},
		Scopes: []aais.Scope{aais.ScopeSession, aais.ScopePersistent}}}})
	req, body := submitRequest(t, reqOpts{persistent: true})
	if status, _, raw := e.do(t, "POST", "/approvals/requests", body, token); status != http.StatusAccepted {
		t.Fatalf("persistent under a policy allowing it: %d %s", status, raw)
	}
	approve(t, e.auth, req, aais.ScopePersistent)
	later, body := submitRequest(t, reqOpts{persistent: true, content: "later"})
	status, m, raw := e.do(t, "POST", "/approvals/requests", body, token)
	if status != http.StatusOK || m.Resolution == nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("a later matching request: %d %s", status, raw)
	}
	rules, err := e.auth.Rules(t.Context())
	if err != nil || len(rules) != 1 {
		t.Fatalf("rules: %v %d", err, len(rules))
	}
	id := rules[0].ID
	var exp struct {
		Rules []struct {
			Matched bool     `json:"matched"`
			Reason  string   `json:"reason"`
			Because []string `json:"because"`
		} `json:"rules"`
	}
	get := func() {
		t.Helper()
		r, err := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/approvals/"+later.ID+"/rules", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&exp); err != nil || resp.StatusCode != http.StatusOK || len(exp.Rules) != 1 {
			t.Fatalf("explain: %d %v %+v", resp.StatusCode, err, exp)
		}
	}
	get()
	because := strings.Join(exp.Rules[0].Because, "\n")
	if !exp.Rules[0].Matched || !strings.Contains(because, "rule "+id+": a persistent approval by alice") ||
		!strings.Contains(because, `action_name is "write_file"`) || !strings.Contains(because, "the remember policy allows persistent approvals of it") {
		t.Fatalf("explanation: %+v", exp)
	}
	rv, err := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/approvals/rules/"+id+"/revoke", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(rv)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	get()
	if exp.Rules[0].Matched || exp.Rules[0].Reason != "the rule was revoked" {
		t.Fatalf("explanation after revocation: %+v", exp)
	}
	_, body = submitRequest(t, reqOpts{persistent: true, content: "after"})
	if status, _, raw := e.do(t, "POST", "/approvals/requests", body, token); status != http.StatusAccepted {
		t.Fatalf("a request after the revocation: %d %s", status, raw)
	}
}
