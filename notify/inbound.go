package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// Decider takes a decision through the runtime's one decision path
// (httpapi.Decider: the policy, then the authority), as actor.
type Decider interface {
	Decide(ctx context.Context, d *aais.Decision, actor aais.Actor) (*aais.Message, error)
}

// Requests reads a request's state (an *aais.Authority).
type Requests interface {
	State(ctx context.Context, id string) (aais.RequestState, error)
}

// Decisions is what the inbound handlers decide with.
type Decisions struct {
	Decider  Decider
	Requests Requests
	// JustificationRequired says whether actor's approval of req needs a
	// justification (httpapi.Policy.Permission); nil: never asked for,
	// and the policy refuses an approval that needed one.
	JustificationRequired func(actor aais.Actor, req *aais.Request) bool
	// Reviewers are the configured reviewers by id, for their display
	// names; a mapped id missing here is refused.
	Reviewers map[string]aais.Actor
	// Logger receives refused callbacks (nothing is logged when nil).
	Logger *slog.Logger
	// Now is the clock of signature windows and decided_at (time.Now when
	// nil).
	Now func() time.Time

	logs logLimiter
}

func (d *Decisions) now() time.Time {
	if d.Now == nil {
		return time.Now()
	}
	return d.Now()
}

func (d *Decisions) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// reviewer returns the actor of reviewer id, authenticated by via.
func (d *Decisions) reviewer(id, via string) (aais.Actor, bool) {
	a, ok := d.Reviewers[id]
	if !ok || id == "" {
		return aais.Actor{}, false
	}
	a.ID, a.Type, a.AuthenticatedBy = id, aais.ActorHuman, via
	return a, true
}

// Refusal is a decision the Decider refused, with what the reviewer may
// be told (the policy's reason).
type Refusal struct {
	// Status is the HTTP status to answer; Detail the reason.
	Status int
	Detail string
}

func (r *Refusal) Error() string { return r.Detail }

// reason is the part of a failure a reviewer may read.
func reason(err error) string {
	var r *Refusal
	switch {
	case errors.As(err, &r):
		return r.Detail
	case errors.Is(err, errNotPending):
		return "the request is no longer pending."
	case errors.Is(err, aais.ErrUnknownRequest):
		return "no such request."
	case errors.Is(err, aais.ErrInvalid):
		return "the decision is not valid."
	}
	return "the decision failed."
}

// errNotPending: the request is no longer waiting for a decision.
var errNotPending = errors.New("the request is no longer pending")

// request returns the pending request id.
func (d *Decisions) request(ctx context.Context, id string) (*aais.Request, error) {
	st, err := d.Requests.State(ctx, id)
	if err != nil {
		return nil, err
	}
	if !st.Pending() {
		return nil, errNotPending
	}
	return st.Request.Event.Request, nil
}

// decide decides v (scope once) on request id as actor, for the digest
// the reviewer was shown.
func (d *Decisions) decide(ctx context.Context, id, digest string, v aais.Verdict, actor aais.Actor, justification string) (*aais.Message, error) {
	req, err := d.request(ctx, id)
	if err != nil {
		return nil, err
	}
	p := aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce, Actor: actor, DecidedAt: d.now()}
	if justification != "" {
		j, err := json.Marshal(justification)
		if err != nil {
			return nil, err
		}
		p.Extensions = aais.Extensions{aais.JustificationExtension: j}
	}
	dec, err := aais.NewDecision(req, p)
	if err != nil {
		return nil, err
	}
	// The digest the reviewer saw: the authority answers stale if it is
	// not the request's.
	dec.ActionDigest = digest
	return d.Decider.Decide(ctx, dec, actor)
}

// refuse logs a refused callback (at most refusalLogs a minute, then one
// line saying how many were not logged) and answers it.
func (d *Decisions) refuse(ctx context.Context, w http.ResponseWriter, status int, channel, why string, err error) {
	if ok, dropped := d.logs.allow(d.now()); ok {
		args := []any{"channel", channel, "reason", why}
		if err != nil {
			args = append(args, "err", err)
		}
		if dropped > 0 {
			args = append(args, "not_logged_before", dropped)
		}
		d.logger().WarnContext(ctx, "notifications: callback refused, nothing changed", args...)
	}
	http.Error(w, why, status)
}

// refusalLogs is how many refused callbacks are logged per minute.
const refusalLogs = 20

// logLimiter lets refusalLogs lines through per minute.
type logLimiter struct {
	mu      sync.Mutex
	start   time.Time
	n       int
	dropped int
}

func (l *logLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= time.Minute {
		l.start, l.n = now, 0
	}
	if l.n >= refusalLogs {
		l.dropped++
		return false, 0
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// outcomeText says what a receipt did, for the reviewer.
func outcomeText(m *aais.Message) string {
	if aais.Partial(m) {
		return "Recorded: " + m.Activity.Message
	}
	r := m.Resolution
	if r.Outcome == aais.OutcomeConflict {
		return "Nothing changed: " + r.Message
	}
	return fmt.Sprintf("Recorded: %s (request %s).", r.Outcome, r.RequestID)
}
