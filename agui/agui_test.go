package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/agui"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/store/memstore"
)

var (
	alice   = aais.Actor{ID: "alice", Type: aais.ActorHuman, AuthenticatedBy: "api_token"}
	mallory = aais.Actor{ID: "mallory", Type: aais.ActorHuman, AuthenticatedBy: "forged"}
	action  = json.RawMessage(`{"kind":"tool.call","name":"acme.crm.lookup","summary":"Calls the MCP tool \"add\"","arguments":{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","arguments":{"a":1}},"id":1},"effects":[]}`)
)

// pending creates a request in a fresh authority and returns its
// approval.requested event.
func pending(t testing.TB) (*aais.Authority, *aais.Message) {
	t.Helper()
	auth, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	req, err := aais.NewRequest(aais.RequestParams{
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute),
		Origin: aais.Origin{Harness: "agui-test", SessionID: "thread-1"},
		Action: action,
		Risk:   aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Calls a tool"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev, _, err := auth.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return auth, ev
}

// decided returns the approval.decided envelope for req, naming actor.
func decided(t testing.TB, req *aais.Request, v aais.Verdict, actor aais.Actor) []byte {
	t.Helper()
	d, err := aais.NewDecision(req, aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce, Actor: actor, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resumeBody is the RunAgentInput of the new run.
func resumeBody(id string, env []byte) []byte {
	return []byte(`{"threadId":"thread-1","runId":"run-2","messages":[],"state":{},"tools":[],"context":[],"forwardedProps":{},` +
		`"resume":{"interruptId":"` + id + `","payload":{"approved":true,"actor":"mallory"},"metadata":{"aais":` + string(env) + `}}}`)
}

func TestInterrupt(t *testing.T) {
	_, ev := pending(t)
	b, err := agui.InterruptRun("thread-1", "run-1", ev)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Type      string `json:"type"`
		ThreadID  string `json:"threadId"`
		RunID     string `json:"runId"`
		Outcome   string `json:"outcome"`
		Interrupt struct {
			ID       string                     `json:"id"`
			Reason   string                     `json:"reason"`
			Message  string                     `json:"message"`
			Metadata map[string]json.RawMessage `json:"metadata"`
		} `json:"interrupt"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Type != "RUN_FINISHED" || out.Outcome != "interrupt" || out.ThreadID != "thread-1" || out.RunID != "run-1" ||
		out.Interrupt.ID != ev.Request.ID || out.Interrupt.Reason != "tool_call" || !strings.Contains(out.Interrupt.Message, `"add"`) {
		t.Fatalf("event %s", b)
	}
	want, _ := aais.Marshal(ev)
	if !bytes.Equal(out.Interrupt.Metadata["aais"], want) {
		t.Errorf("interrupt.metadata.aais is not the envelope:\n%s\n%s", out.Interrupt.Metadata["aais"], want)
	}
	got, err := aais.Parse(out.Interrupt.Metadata["aais"])
	if err != nil || got.Type != aais.TypeRequested || got.Request.ActionDigest != ev.Request.ActionDigest {
		t.Errorf("envelope: %v", err)
	}
	b, err = agui.Interrupt(ev)
	if err != nil || bytes.Contains(b, []byte("threadId")) {
		t.Errorf("%s %v", b, err)
	}
	for _, bad := range []*aais.Message{nil, {Type: aais.TypeDecided}, {Type: aais.TypeRequested}} {
		if _, err := agui.Interrupt(bad); !errors.Is(err, agui.ErrInvalidRequest) {
			t.Errorf("Interrupt(%+v) = %v", bad, err)
		}
	}
}

func TestResumeApprove(t *testing.T) {
	auth, ev := pending(t)
	// The body's decision names mallory; the channel authenticated alice.
	body := resumeBody(ev.Request.ID, decided(t, ev.Request, aais.Approve, mallory))
	out, err := agui.Resume(context.Background(), auth, body, alice, action)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Continue || out.Receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("outcome %+v", out.Receipt.Resolution)
	}
	who, _, ok := aais.DecidedBy(out.Receipt.Resolution)
	if !ok || who.ID != "alice" {
		t.Errorf("decided by %+v, want alice (the forged actor was used)", who)
	}
	// The same resume again: the same receipt, still continuing.
	again, err := agui.Resume(context.Background(), auth, body, alice, action)
	if err != nil || !again.Continue || again.Receipt.Resolution.ID != out.Receipt.Resolution.ID {
		t.Errorf("repeat: %+v %v", again, err)
	}
	// A different decision afterwards ends the run (conflict).
	other := resumeBody(ev.Request.ID, decided(t, ev.Request, aais.Deny, alice))
	c, err := agui.Resume(context.Background(), auth, other, alice, action)
	if err != nil || c.Continue || c.Receipt.Resolution.Outcome != aais.OutcomeConflict {
		t.Errorf("conflicting decision: %+v %v", c, err)
	}
}

func TestResumeDeny(t *testing.T) {
	auth, ev := pending(t)
	// The resume object alone is accepted too.
	env := decided(t, ev.Request, aais.Deny, alice)
	body := []byte(`{"interruptId":"` + ev.Request.ID + `","metadata":{"aais":` + string(env) + `}}`)
	out, err := agui.Resume(context.Background(), auth, body, alice, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Continue || out.Receipt == nil || out.Receipt.Resolution.Outcome != aais.OutcomeDenied ||
		out.Receipt.Resolution.RequestID != ev.Request.ID {
		t.Fatalf("outcome %+v", out)
	}
}

func TestResumeStale(t *testing.T) {
	auth, ev := pending(t)
	body := resumeBody(ev.Request.ID, decided(t, ev.Request, aais.Approve, alice))
	changed := bytes.Replace(action, []byte(`"a":1`), []byte(`"a":2`), 1)
	out, err := agui.Resume(context.Background(), auth, body, alice, changed)
	if err != nil {
		t.Fatal(err)
	}
	if out.Continue || out.Receipt.Resolution.Outcome != aais.OutcomeStale {
		t.Fatalf("outcome %+v", out.Receipt.Resolution)
	}
}

func TestResumeUnauthenticated(t *testing.T) {
	auth, ev := pending(t)
	body := resumeBody(ev.Request.ID, decided(t, ev.Request, aais.Approve, alice))
	for _, a := range []aais.Actor{{}, {ID: "alice"}, {Type: aais.ActorHuman}} {
		if _, err := agui.Resume(context.Background(), auth, body, a, nil); !errors.Is(err, agui.ErrUnauthenticated) {
			t.Errorf("actor %+v: %v", a, err)
		}
	}
	st, err := auth.State(context.Background(), ev.Request.ID)
	if err != nil || st.Resolution != nil {
		t.Errorf("decided without an actor: %+v %v", st.Resolution, err)
	}
}

func TestResumeMalformed(t *testing.T) {
	auth, ev := pending(t)
	id := ev.Request.ID
	env := string(decided(t, ev.Request, aais.Approve, alice))
	reqEnv, _ := aais.Marshal(ev)
	for name, body := range map[string]string{
		"empty":              ``,
		"not json":           `{`,
		"array":              `[]`,
		"trailing":           `{"interruptId":"` + id + `","metadata":{"aais":` + env + `}} {}`,
		"neither":            `{"threadId":"t"}`,
		"resume not object":  `{"resume":[]}`,
		"unknown input":      `{"resume":{"interruptId":"` + id + `","metadata":{"aais":` + env + `}},"actor":"x"}`,
		"unknown resume":     `{"interruptId":"` + id + `","metadata":{"aais":` + env + `},"actor":{"id":"root"}}`,
		"no interrupt id":    `{"resume":{"metadata":{"aais":` + env + `}}}`,
		"empty interrupt id": `{"interruptId":"","metadata":{"aais":` + env + `}}`,
		"numeric id":         `{"interruptId":7,"metadata":{"aais":` + env + `}}`,
		"no metadata":        `{"interruptId":"` + id + `"}`,
		"no aais":            `{"interruptId":"` + id + `","metadata":{"other":1}}`,
		"aais string":        `{"interruptId":"` + id + `","metadata":{"aais":"` + strings.ReplaceAll(env, `"`, `\"`) + `"}}`,
		"aais invalid":       `{"interruptId":"` + id + `","metadata":{"aais":{"type":"approval.decided"}}}`,
		"aais request":       `{"interruptId":"` + id + `","metadata":{"aais":` + string(reqEnv) + `}}`,
		"other request":      `{"interruptId":"apr_00000000000000000000000000000000","metadata":{"aais":` + env + `}}`,
		"duplicate member":   `{"interruptId":"x","interruptId":"` + id + `","metadata":{"aais":` + env + `}}`,
		"invalid utf8":       "{\"interruptId\":\"\xff\",\"metadata\":{}}",
		"tampered digest":    `{"interruptId":"` + id + `","metadata":{"aais":` + strings.Replace(env, `"sha256:`, `"sha256:0`, 1) + `}}`,
	} {
		_, err := agui.Resume(context.Background(), auth, []byte(body), alice, nil)
		if !errors.Is(err, agui.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	st, err := auth.State(context.Background(), id)
	if err != nil || st.Resolution != nil {
		t.Errorf("a malformed resume decided: %+v %v", st.Resolution, err)
	}
}

func TestHandler(t *testing.T) {
	auth, ev := pending(t)
	tokens, err := httpapi.NewTokens(map[string]aais.Actor{httpapi.TokenHash("tok-alice"): {ID: "alice", Type: aais.ActorHuman}})
	if err != nil {
		t.Fatal(err)
	}
	refuse := false
	h, err := agui.NewHandler(agui.HandlerOptions{Authority: auth, Auth: tokens,
		Authorize: func(_ context.Context, a aais.Actor, _ *aais.Request, _ *aais.Decision) error {
			if refuse {
				return errors.New("not a reviewer")
			}
			return nil
		},
		CurrentAction: func(context.Context, *aais.Request) ([]byte, error) { return action, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	body := resumeBody(ev.Request.ID, decided(t, ev.Request, aais.Approve, mallory))
	post := func(token, ct string, b []byte) (int, []byte) {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, srv.URL+agui.ResumePath, bytes.NewReader(b))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		r.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	if s, _ := post("", "application/json", body); s != 401 {
		t.Errorf("no token: %d", s)
	}
	if s, _ := post("wrong", "application/json", body); s != 401 {
		t.Errorf("wrong token: %d", s)
	}
	if s, _ := post("tok-alice", "text/plain", body); s != 415 {
		t.Errorf("text/plain: %d", s)
	}
	if s, b := post("tok-alice", "application/json", []byte(`{"resume":{}}`)); s != 400 || !strings.Contains(string(b), "agent_status") {
		t.Errorf("malformed: %d %s", s, b)
	}
	refuse = true
	if s, _ := post("tok-alice", "application/json", body); s != 403 {
		t.Errorf("refused by policy: %d", s)
	}
	refuse = false
	s, b := post("tok-alice", "application/json; charset=utf-8", body)
	if s != 200 {
		t.Fatalf("resume: %d %s", s, b)
	}
	var out agui.ResumeResponse
	if err := json.Unmarshal(b, &out); err != nil || !out.Continue || out.Outcome != aais.OutcomeApproved {
		t.Fatalf("answer %s %v", b, err)
	}
	receipt, err := aais.Parse(out.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	if who, _, _ := aais.DecidedBy(receipt.Resolution); who.ID != "alice" {
		t.Errorf("decided by %+v", who)
	}
	other := resumeBody("apr_00000000000000000000000000000001", []byte(`{}`))
	if s, _ := post("tok-alice", "application/json", other); s != 400 {
		t.Errorf("unknown: %d", s)
	}
	r, _ := http.Get(srv.URL + agui.ResumePath)
	if r.StatusCode != 405 {
		t.Errorf("GET: %d", r.StatusCode)
	}
	_ = r.Body.Close()
}
