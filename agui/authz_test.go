package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
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

// An AG-UI resume passes the reviewer policy custos serve wires
// (Policy.Check): under separation of duties, the caller that submitted a
// request through POST /approvals/requests may not approve it here
// either, and a reviewer without a role may not decide it at all.
func TestResumeAppliesThePolicyToTheSubmitter(t *testing.T) {
	auth, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := httpapi.NewTokens(map[string]aais.Actor{
		httpapi.TokenHash("tok-proxy"):  {ID: "proxy", Type: aais.ActorPolicy},
		httpapi.TokenHash("tok-alice"):  {ID: "alice", Type: aais.ActorHuman},
		httpapi.TokenHash("tok-nobody"): {ID: "nobody", Type: aais.ActorHuman},
	})
	if err != nil {
		t.Fatal(err)
	}
	pol := &httpapi.Policy{
		Roles:              map[string]httpapi.Role{"crm": {Capabilities: []string{"acme.crm.*"}}},
		Grants:             map[string][]string{"proxy": {"crm"}, "alice": {"crm"}},
		SeparationOfDuties: []string{"MIFID-II"},
	}
	quiet := slog.New(slog.DiscardHandler)
	submit, err := httpapi.NewSubmit(httpapi.SubmitOptions{Authority: auth, Auth: tokens, Policy: pol, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	resume, err := agui.NewHandler(agui.HandlerOptions{Authority: auth, Auth: tokens, Logger: quiet,
		Authorize: func(_ context.Context, a aais.Actor, r *aais.Request, d *aais.Decision) error {
			return pol.Check(a, r, d)
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/requests", submit)
	mux.Handle(agui.ResumePath, resume)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	post := func(path, token string, body []byte) (int, []byte) {
		t.Helper()
		r, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	now := time.Now()
	prof, _ := json.Marshal(map[string]string{"profile": "MIFID-II"})
	req, err := aais.NewRequest(aais.RequestParams{
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute),
		Origin: aais.Origin{Harness: "agui-test", SessionID: "thread-1", RunID: "run-1"},
		Action: action, Risk: aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Calls a tool"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
		Extensions: aais.Extensions{httpapi.ExchangeExtension: prof},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := aais.NewMessage(aais.Header{OccurredAt: now}, req)
	b, _ := aais.Marshal(m)
	if code, out := post("/approvals/requests", "tok-proxy", b); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, out)
	}

	body := resumeBody(req.ID, decided(t, req, aais.Approve, alice))
	for _, tok := range []string{"tok-proxy", "tok-nobody"} {
		if code, out := post(agui.ResumePath, tok, body); code != http.StatusForbidden {
			t.Fatalf("resume with %s: %d %s", tok, code, out)
		}
	}
	if st, err := auth.State(t.Context(), req.ID); err != nil || st.Resolution != nil {
		t.Fatalf("a refused resume decided the request: %v", err)
	}
	code, out := post(agui.ResumePath, "tok-alice", body)
	if code != http.StatusOK || !strings.Contains(string(out), `"continue":true`) {
		t.Fatalf("alice's resume: %d %s", code, out)
	}
}
