package gateway

import (
	"context"
	"encoding/json"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
)

// Edit, then approve.
//
// A reviewer may propose other arguments for a pending approval
// (aais.Authority.Supersede): the request is cancelled with
// aais.SupersededByExtension naming a new request, which carries the edited
// arguments, the same ExchangeExtension and its own digest, and needs its
// own decision. The exchange's ApprovalID never changes (the exchange store
// forbids it); instead, every round of Run reads the chain from it
// (aais.Authority.Chain) and waits on its last request. When that one is
// approved, the call that runs is the edited one: its arguments and its
// digest are the last request's, so handler.Dispatch compares the edited
// action, and nothing of the original runs. The audit holds, in order, one
// approval record per edit (outcome "superseded", with the proposed and the
// edited arguments, the proposer and their justification), the final
// approval record and the execution record with the executed arguments.
// The sender's approval_decision says approved with the condition
// "arguments edited by <reviewer>", and its response is the edited call's
// result.

// OutcomeSuperseded is the audit outcome of an approval replaced by an
// edit.
const OutcomeSuperseded = "superseded"

// edit is one link of an approval's supersession chain.
type edit struct {
	// from was superseded by to; receipt is from's cancellation.
	from, to *aais.Request
	receipt  *aais.Message
	ref      aais.SupersedesRef
}

// approvalChain returns the state of the request an exchange waits on:
// its approval, or the last request of the approval's supersession chain,
// and the edits that led there (none when it was never edited).
func (g *Gateway) approvalChain(ctx context.Context, approvalID string) (aais.RequestState, []edit, error) {
	chain, err := g.o.Authority.Chain(ctx, approvalID)
	if err != nil {
		return aais.RequestState{}, nil, err
	}
	var edits []edit
	for i := 1; i < len(chain); i++ {
		to := chain[i].Request.Event.Request
		ref, _ := aais.Supersedes(to) // Chain checked it
		edits = append(edits, edit{from: chain[i-1].Request.Event.Request, to: to,
			receipt: chain[i-1].Resolution.Event, ref: ref})
	}
	return chain[len(chain)-1], edits, nil
}

// auditEdits records one approval record per edit of the chain, before
// the final decision's record.
func (g *Gateway) auditEdits(ctx context.Context, call handler.Call, profile string, edits []edit) error {
	for _, e := range edits {
		details := map[string]any{
			"proposed_arguments": json.RawMessage(e.from.Action.Arguments()),
			"edited_arguments":   json.RawMessage(e.to.Action.Arguments()),
			"proposed_by":        e.ref.ProposedBy.ID,
			"superseded_by":      e.to.ID,
			"proposed_digest":    e.from.ActionDigest,
			"edited_digest":      e.to.ActionDigest,
		}
		if e.ref.Justification != "" {
			details["justification"] = e.ref.Justification
		}
		a := e.ref.ProposedBy
		rec := audit.Approval(g.subjectOf(call, profile, string(compliance.OversightRequiredBeforeExecution)), e.from.ID, e.receipt.Resolution.ID)
		rec.Outcome, rec.ASCCode, rec.Actor, rec.Details = OutcomeSuperseded, int(asc.Cancelled), auditActor(a), details
		if _, err := g.o.Audit.Append(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

// editConditions are the conditions of an approval_decision for an
// approval reached through edits.
func editConditions(edits []edit) []string {
	var out []string
	for _, e := range edits {
		out = append(out, "arguments edited by "+e.ref.ProposedBy.ID)
	}
	return out
}

// editedDecisionEnvelope is decisionEnvelope for an approval reached
// through edits: an approval carries the edit conditions.
func (g *Gateway) editedDecisionEnvelope(ctx context.Context, x exchange.Exchange, receipt *aais.Message, edits []edit) (json.RawMessage, error) {
	res := receipt.Resolution
	if res.Outcome != aais.OutcomeApproved || len(edits) == 0 {
		return g.decisionEnvelope(ctx, x, receipt)
	}
	d := approvalDecision(res)
	d.Conditions = editConditions(edits)
	return g.signDecision(ctx, x, d)
}

// editDetails are the execution record's details of an edited call.
func editDetails(edits []edit, call handler.Call) map[string]any {
	if len(edits) == 0 {
		return nil
	}
	return map[string]any{"executed_arguments": json.RawMessage(call.Args), "edited": true,
		"original_request_id": edits[0].from.ID}
}
