package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/audit"
)

var (
	editAlice = aais.Actor{ID: "alice", Type: aais.ActorHuman, AuthenticatedBy: "session/password"}
	editBob   = aais.Actor{ID: "bob", Type: aais.ActorHuman, AuthenticatedBy: "api_token"}
)

// editPending sends a high-risk request, has alice edit its arguments and
// returns the exchange id, the message id, the original and the edited
// requests.
func editPending(t *testing.T, r *pipeRig) (xid, msgID string, orig, edited *aais.Request) {
	t.Helper()
	rep, id := r.pending(t, req{args: map[string]any{"text": "refund 100.00 to ACME"}})
	x, err := r.xs.Get(t.Context(), rep.ExchangeID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.auth.State(t.Context(), x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(time.Second)
	_, created, err := r.auth.Supersede(t.Context(), x.ApprovalID, json.RawMessage(`{"text":"refund 10.00 to ACME"}`),
		editAlice, "Only the disputed line.")
	if err != nil {
		t.Fatal(err)
	}
	return rep.ExchangeID, id, st.Request.Event.Request, created.Request
}

func (r *pipeRig) decideAs(t *testing.T, q *aais.Request, v aais.Verdict, who aais.Actor, why string) *aais.Message {
	t.Helper()
	p := aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce, Actor: who, DecidedAt: r.clk.Now()}
	if why != "" {
		j, _ := json.Marshal(why)
		p.Extensions = aais.Extensions{aais.JustificationExtension: j}
	}
	d, err := aais.NewDecision(q, p)
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := r.auth.Decide(t.Context(), d, who, nil)
	if err != nil {
		t.Fatal(err)
	}
	return receipt
}

func TestEditThenApproveEndToEnd(t *testing.T) {
	r := newPipeRig(t)
	ctx := t.Context()
	xid, msgID, orig, edited := editPending(t, r)

	// The exchange follows the edit: still waiting, nothing ran.
	step(t, r.g.resume)
	if st, _ := r.g.Exchange(ctx, xid); st.Status != 202 {
		t.Fatalf("after the edit: %d %s", st.Status, st.Envelope)
	}
	if n := r.echo.n.Load(); n != 0 {
		t.Fatalf("ran %d times before the edit was approved", n)
	}
	if recs := r.recordsOf(t, audit.KindApproval, msgID); len(recs) != 0 {
		t.Fatalf("approval records before the decision: %+v", recs)
	}

	// bob approves the edited request.
	const why = "The smaller amount is right."
	if rc := r.decideAs(t, edited, aais.Approve, editBob, why); rc.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("receipt: %+v", rc.Resolution)
	}
	r.clk.Advance(time.Second)
	step(t, r.g.resume)
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("the edited call ran %d times", n)
	}
	var args map[string]string
	if err := json.Unmarshal(r.echo.lastCall(t).Args, &args); err != nil || args["text"] != "refund 10.00 to ACME" {
		t.Fatalf("the handler ran with %s", r.echo.lastCall(t).Args)
	}

	// The sender's reply is the edited call's result.
	final, err := r.g.Exchange(ctx, xid)
	if err != nil || final.Status != 200 {
		t.Fatalf("final: %d %s %v", final.Status, final.Envelope, err)
	}
	fm := r.verified(t, final.Envelope)
	if fm["intent"] != "response" || fm["correlation_id"] != msgID || get(fm, "payload", "result", "echo", "text") != "refund 10.00 to ACME" {
		t.Errorf("final reply: %s", final.Envelope)
	}

	// The decision: approved by bob, with the edit as a condition.
	raw, err := r.g.Decision(ctx, xid)
	if err != nil || raw == nil {
		t.Fatalf("decision: %s %v", raw, err)
	}
	dm := r.verified(t, raw)
	if get(dm, "payload", "result", "decision") != arsia.DecisionApproved || get(dm, "payload", "result", "approver_id") != "bob" ||
		get(dm, "payload", "result", "reason") != why {
		t.Errorf("decision: %s", raw)
	}
	if conds, _ := get(dm, "payload", "result", "conditions").([]any); len(conds) != 1 || conds[0] != "arguments edited by alice" {
		t.Errorf("conditions: %v", get(dm, "payload", "result", "conditions"))
	}
	if issues := arsia.ErrorIssues(arsia.Validate(dm, arsia.ValidateOptions{})); len(issues) > 0 {
		t.Errorf("decision envelope: %v", issues)
	}

	// The audit: the supersession, the approval, the execution, with the
	// proposed, edited and executed arguments distinct.
	var kinds []string
	for _, rec := range r.records(t) {
		if rec.MessageID == msgID {
			kinds = append(kinds, string(rec.Kind)+"/"+rec.Outcome)
		}
	}
	want := []string{"received/accepted", "approval/superseded", "approval/approved", "execution/succeeded"}
	if len(kinds) != len(want) {
		t.Fatalf("records %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("records %v, want %v", kinds, want)
		}
	}
	apr := r.recordsOf(t, audit.KindApproval, msgID)
	sup, ok := apr[0], apr[1]
	if sup.RequestID != orig.ID || sup.Actor.ID != "alice" || sup.Actor.AuthenticatedBy != "session/password" ||
		sup.Details["proposed_by"] != "alice" || sup.Details["justification"] != "Only the disputed line." ||
		sup.Details["superseded_by"] != edited.ID {
		t.Errorf("supersession record: %+v", sup)
	}
	if text(t, sup.Details["proposed_arguments"]) != "refund 100.00 to ACME" || text(t, sup.Details["edited_arguments"]) != "refund 10.00 to ACME" {
		t.Errorf("supersession arguments: %v / %v", sup.Details["proposed_arguments"], sup.Details["edited_arguments"])
	}
	if ok.RequestID != edited.ID || ok.Actor.ID != "bob" || ok.Details["justification"] != why {
		t.Errorf("approval record: %+v", ok)
	}
	exe := r.recordsOf(t, audit.KindExecution, msgID)
	if len(exe) != 1 || exe[0].RequestID != edited.ID || exe[0].Details["action_digest"] != edited.ActionDigest ||
		text(t, exe[0].Details["executed_arguments"]) != "refund 10.00 to ACME" || exe[0].Details["original_request_id"] != orig.ID {
		t.Errorf("execution record: %+v", exe)
	}
}

// text returns the "text" member of an arguments object in a record's
// details.
func text(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("arguments %s: %v", b, err)
	}
	return m["text"]
}

func TestEditThenDeny(t *testing.T) {
	r := newPipeRig(t)
	xid, msgID, orig, edited := editPending(t, r)
	r.decideAs(t, edited, aais.Deny, editBob, "No refund at all.")
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 0 {
		t.Fatalf("a denied edit ran %d times", n)
	}
	final, err := r.g.Exchange(t.Context(), xid)
	if err != nil || final.Status != 403 {
		t.Fatalf("final: %d %s %v", final.Status, final.Envelope, err)
	}
	fm := r.verified(t, final.Envelope)
	if get(fm, "payload", "error", "details", "approval_request_id") != edited.ID && get(fm, "payload", "details", "approval_request_id") != edited.ID {
		t.Logf("refusal: %s", final.Envelope)
	}
	apr := r.recordsOf(t, audit.KindApproval, msgID)
	if len(apr) != 2 || apr[0].Outcome != OutcomeSuperseded || apr[0].RequestID != orig.ID ||
		apr[1].Outcome != string(aais.OutcomeDenied) || apr[1].RequestID != edited.ID {
		t.Errorf("approval records: %+v", apr)
	}
}

func TestEditExpires(t *testing.T) {
	r := newPipeRig(t)
	xid, _, _, edited := editPending(t, r)
	r.clk.Advance(time.Hour)
	step(t, r.g.resume) // expires the edited request, at the exchange's deadline
	st, err := r.auth.State(t.Context(), edited.ID)
	if err != nil || st.Resolution == nil || st.Resolution.Event.Resolution.Outcome != aais.OutcomeExpired {
		t.Fatalf("edited request: %+v %v", st.Resolution, err)
	}
	step(t, r.g.resume)
	if final, err := r.g.Exchange(t.Context(), xid); err != nil || final.Status != 403 {
		t.Fatalf("final: %d %s %v", final.Status, final.Envelope, err)
	}
	if n := r.echo.n.Load(); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// TestEditTwice: two edits in a row; the last approved one runs, and
// each edit is in the audit.
func TestEditTwice(t *testing.T) {
	r := newPipeRig(t)
	xid, msgID, _, first := editPending(t, r)
	_, second, err := r.auth.Supersede(t.Context(), first.ID, json.RawMessage(`{"text":"refund 20.00 to ACME"}`), editBob, "")
	if err != nil {
		t.Fatal(err)
	}
	carol := aais.Actor{ID: "carol", Type: aais.ActorHuman}
	r.decideAs(t, second.Request, aais.Approve, carol, "")
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 1 || text(t, json.RawMessage(r.echo.lastCall(t).Args)) != "refund 20.00 to ACME" {
		t.Fatalf("ran %d times with %s", n, r.echo.lastCall(t).Args)
	}
	if apr := r.recordsOf(t, audit.KindApproval, msgID); len(apr) != 3 || apr[0].Actor.ID != "alice" || apr[1].Actor.ID != "bob" || apr[2].Actor.ID != "carol" {
		t.Errorf("approval records: %+v", apr)
	}
	dm := r.verified(t, mustDecision(t, r, xid))
	if conds, _ := get(dm, "payload", "result", "conditions").([]any); len(conds) != 2 {
		t.Errorf("conditions: %v", conds)
	}
}

func mustDecision(t *testing.T, r *pipeRig, xid string) []byte {
	t.Helper()
	raw, err := r.g.Decision(t.Context(), xid)
	if err != nil || raw == nil {
		t.Fatalf("decision: %s %v", raw, err)
	}
	return raw
}
