package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// A question is answered through the decision endpoint: an approval with a
// reply, which the receipt carries to the agent; the policy refuses a
// reply where none belongs and an approval of a question without one.
func TestRespondToAQuestion(t *testing.T) {
	e := newAuthzEnv(t)
	now := time.Now().UTC()
	ask := func(id string, question bool) *aais.Request {
		ext := aais.Extensions{}
		if question {
			ext[aais.QuestionExtension] = json.RawMessage(`{"prompt":"Which account should the refund go to?"}`)
		}
		req, err := aais.NewRequest(aais.RequestParams{ID: id, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			Origin: aais.Origin{Harness: "test", SessionID: "s-1", AgentID: "agent:a"},
			Action: json.RawMessage(`{"kind":"agent.question","name":"write_file","summary":"Ask the reviewer","arguments":{}}`),
			Risk:   aais.Risk{Level: aais.RiskLow, Reasons: []string{"a question"}},
			Choices: []aais.Choice{{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Reply"},
				{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Decline"}},
			Extensions: ext})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.auth.Create(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		return req
	}
	q := ask("apr_q1", true)
	plain := ask("apr_plain", false)
	reply := func(text string) aais.Extensions {
		b, _ := json.Marshal(text)
		return aais.Extensions{aais.ResponseExtension: b}
	}
	for _, c := range []struct {
		name string
		req  *aais.Request
		v    aais.Verdict
		ext  aais.Extensions
		says string
	}{
		{"approve without a reply", q, aais.Approve, nil, "asks a question"},
		{"empty reply", q, aais.Approve, reply("  "), "empty"},
		{"reply too long", q, aais.Approve, reply(strings.Repeat("x", aais.MaxResponse+1)), "at most 4000"},
		{"reply not a string", q, aais.Approve, aais.Extensions{aais.ResponseExtension: json.RawMessage(`{"a":1}`)}, "must be a string"},
		{"reply with a denial", q, aais.Deny, reply("no"), "goes with approve"},
		{"reply to no question", plain, aais.Approve, reply("hello"), "asks no question"},
	} {
		code, out := e.call(t, "POST", "/approvals/"+c.req.ID+"/decisions", decisionJSON(t, c.req, c.v, c.ext), "writer")
		if code != 422 || !strings.Contains(out, c.says) {
			t.Errorf("%s: %d %s; want 422 saying %q", c.name, code, out, c.says)
		}
		if !e.pending(t, c.req.ID) {
			t.Fatalf("%s: the request was resolved", c.name)
		}
	}
	// Someone whose roles do not cover it may not reply.
	if code, out := e.call(t, "POST", "/approvals/"+q.ID+"/decisions", decisionJSON(t, q, aais.Approve, reply("DE89 3704")), "biller"); code != 403 {
		t.Fatalf("biller replied: %d %s", code, out)
	}
	code, out := e.call(t, "POST", "/approvals/"+q.ID+"/decisions", decisionJSON(t, q, aais.Approve, reply("The account ending 3704.")), "writer")
	if code != 200 {
		t.Fatalf("reply: %d %s", code, out)
	}
	m, err := aais.Parse([]byte(out))
	if err != nil || m.Resolution.Outcome != aais.OutcomeApproved || aais.ResponseOf(m.Resolution) != "The account ending 3704." {
		t.Fatalf("receipt %s (%v)", out, err)
	}
	// What the agent waits on, from the store, carries the reply too.
	st, err := e.auth.State(t.Context(), q.ID)
	if err != nil || aais.ResponseOf(st.Resolution.Event.Resolution) != "The account ending 3704." {
		t.Fatalf("stored receipt: %v", err)
	}
	h := e.history(t, "writer", "limit=1").Resolved[0]
	if h.Question != "Which account should the refund go to?" || h.Response != "The account ending 3704." {
		t.Fatalf("history entry %+v", h)
	}
	// The plain request is approved as before, without a reply.
	if code, out := e.call(t, "POST", "/approvals/"+plain.ID+"/decisions", decisionJSON(t, plain, aais.Approve, nil), "writer"); code != 200 {
		t.Fatalf("plain approval: %d %s", code, out)
	}
}
