package aais

import (
	"context"
	"encoding/json"
	"fmt"
)

// DeadlineExtension is the receipt extension the runtime records when it
// resolves a request at an escalation deadline (ResolveAtDeadline): the
// rule that set the deadline and, for a denial, the reason.
const DeadlineExtension = "custos.dev/deadline"

// Deadline is the body of DeadlineExtension.
type Deadline struct {
	// Policy names the configured escalation that set the deadline.
	Policy string `json:"policy"`
	// Reason is why the runtime denied the request ("" for an expiry).
	Reason string `json:"reason,omitempty"`
}

// ResolveAtDeadline resolves a pending request because a deadline the
// runtime sets (an escalation policy, not the request's expires_at) has
// passed: as expired (OutcomeExpired, never a denial), or denied by the
// runtime (OutcomeDenied) with d.Reason as the receipt's message, so the
// agent is told why. The receipt carries d in DeadlineExtension. It
// returns the receipt and whether this call resolved the request; a
// request resolved meanwhile keeps its resolution (returned, resolved
// false). Any other outcome, or a denial without a reason, is refused
// (ErrInvalid) and writes nothing.
func (a *Authority) ResolveAtDeadline(ctx context.Context, id string, o Outcome, d Deadline) (*Message, bool, error) {
	switch {
	case o != OutcomeExpired && o != OutcomeDenied:
		return nil, false, fmt.Errorf("%w: a deadline expires or denies a request, not %q", ErrInvalid, o)
	case o == OutcomeDenied && d.Reason == "":
		return nil, false, fmt.Errorf("%w: a denial at a deadline needs a reason", ErrInvalid)
	case d.Policy == "":
		return nil, false, fmt.Errorf("%w: a deadline names its policy", ErrInvalid)
	}
	st, err := a.store.RequestState(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if st.Resolution != nil {
		m, err := receiptOf(*st.Resolution)
		return m, false, err
	}
	req, err := requestOf(st.Request)
	if err != nil {
		return nil, false, err
	}
	ext, err := json.Marshal(d)
	if err != nil {
		return nil, false, err
	}
	now := a.now()
	p := ResolutionParams{Request: req, Outcome: o, ResolvedAt: now, Extensions: Extensions{DeadlineExtension: ext}}
	if o == OutcomeDenied {
		p.Message = "Denied at the deadline: " + d.Reason
	}
	res, _, err := a.opts.buildResolution(p)
	if err != nil {
		return nil, false, err
	}
	ev, err := a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream}, res)
	if err != nil {
		return nil, false, err
	}
	stored, resolved, err := a.store.ResolveIfPending(ctx, ResolutionRecord{Event: ev})
	if err != nil {
		return nil, false, err
	}
	m, err := receiptOf(stored)
	return m, resolved, err
}
