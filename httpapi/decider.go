package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// Decider is the approvals API's decision path for bindings that
// authenticate reviewers their own way (notification channels: a Slack
// button, a signed webhook callback). A decision it takes passes exactly
// what POST /approvals/{id}/decisions passes: the AAIS envelope checks,
// the Policy (roles, separation of duties, justification), the
// supersession check, aais.Authority.Decide and OnDecision.
type Decider struct {
	a *approvals
}

// DecisionError is a decision the Decider refused, in HTTP and ASC
// terms: Status is the HTTP status the approvals API would have answered.
type DecisionError struct {
	Status int
	Code   asc.Code
	Detail string
}

func (e *DecisionError) Error() string {
	return fmt.Sprintf("%s: %s", e.Code.Name(), e.Detail)
}

// NewDecider returns the decision path of o: Authority is required; Policy,
// OnDecision and Logger are used as NewApprovals uses them, the other
// fields are ignored.
func NewDecider(o ApprovalsOptions) (*Decider, error) {
	if o.Authority == nil {
		return nil, errors.New("httpapi: a decider needs an authority")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Decider{a: &approvals{o: o, origins: originPolicy{}}}, nil
}

// Decide decides d as actor, the reviewer the caller's channel
// authenticated (it replaces whatever d names). It returns the receipt
// (outcome conflict included: the request was resolved already), or a
// *DecisionError saying why nothing was decided.
func (d *Decider) Decide(ctx context.Context, dec *aais.Decision, actor aais.Actor) (*aais.Message, error) {
	if dec == nil {
		return nil, &DecisionError{400, asc.InvalidRequest, "No decision."}
	}
	if actor.ID == "" {
		return nil, &DecisionError{401, asc.AuthenticationRequired, "The decision has no authenticated reviewer."}
	}
	c := *dec
	c.Actor = actor
	m, err := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, &c)
	if err != nil {
		return nil, &DecisionError{400, asc.InvalidRequest, "Not a valid decision: " + err.Error()}
	}
	body, err := aais.Marshal(m)
	if err != nil {
		return nil, &DecisionError{400, asc.InvalidRequest, "Not a valid decision: " + err.Error()}
	}
	receipt, f := d.a.decideBody(ctx, body, dec.RequestID, actor)
	if f != nil {
		return nil, &DecisionError{f.status, f.code, f.detail}
	}
	return receipt, nil
}

// Permission is Policy.Permission of the decider's policy: what actor may
// do with req (a channel asks before it offers a choice, or to know
// whether an approval needs a justification).
func (d *Decider) Permission(actor aais.Actor, req *aais.Request) Permission {
	return d.a.o.Policy.Permission(actor, req)
}
