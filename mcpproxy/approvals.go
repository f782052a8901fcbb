package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/liveness"
	"github.com/custos-runtime/custos/store"
)

// Approvals is the AAIS authority a gated call asks. Decisions are made
// elsewhere (the reviewer inbox, custos approvals, the HTTP API); the
// proxy only records requests and waits for their receipts.
type Approvals interface {
	// Submit records req. It returns the request's receipt when it is
	// already resolved (a remembered session rule approved it in the same
	// write), nil while it is pending.
	Submit(ctx context.Context, req *aais.Request) (*aais.Message, error)
	// Wait blocks until the request is resolved and returns its receipt;
	// a request still pending at its expiry is resolved as expired. It
	// returns ctx's error when ctx ends first.
	Wait(ctx context.Context, id string) (*aais.Message, error)
	// Withdraw cancels req when nobody waits for it any more (the call
	// gave up or was cancelled), so that nobody approves it for nothing.
	// Best effort: an error is only logged.
	Withdraw(ctx context.Context, req *aais.Request) error
	// EndSession cancels what is still pending in the proxy's session and
	// revokes the session's remembered approvals.
	EndSession(ctx context.Context, sessionID string) error
	// Close releases what the backend holds.
	Close() error
}

// Embedded is an Approvals on an approval store this process opens
// itself (the policy's store:), or on any aais.Authority.
type Embedded struct {
	auth  *aais.Authority
	poll  time.Duration
	close func() error
}

// NewEmbedded returns the Approvals of an authority the caller owns; Close
// does not close its store.
func NewEmbedded(a *aais.Authority, poll time.Duration) *Embedded {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	return &Embedded{auth: a, poll: poll, close: func() error { return nil }}
}

// OpenEmbedded opens the store at location (store.Parse syntax) with an
// authority that records this process as the owner of its requests, so
// that a request of a proxy that died is withdrawn rather than approved for
// nobody (custos approvals and the inbox leave such requests out).
func OpenEmbedded(ctx context.Context, location string) (*Embedded, error) {
	return OpenEmbeddedWith(ctx, location, nil)
}

// OpenEmbeddedWith is OpenEmbedded with an authority holding remember
// policy rp (Policy.RememberPolicy; none when nil).
func OpenEmbeddedWith(ctx context.Context, location string, rp aais.RememberPolicy) (*Embedded, error) {
	loc, err := store.Parse(location)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenApprovals(ctx, loc)
	if err != nil {
		return nil, err
	}
	owner := liveness.Current()
	a, err := aais.NewAuthority(st, &aais.AuthorityOptions{Owner: &owner, Liveness: liveness.Check, Remember: rp})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	e := NewEmbedded(a, 0)
	e.close = st.Close
	return e, nil
}

// Submit implements Approvals.
func (e *Embedded) Submit(ctx context.Context, req *aais.Request) (*aais.Message, error) {
	sub, err := e.auth.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return sub.Receipt, nil
}

// Wait implements Approvals.
func (e *Embedded) Wait(ctx context.Context, id string) (*aais.Message, error) {
	return e.auth.Wait(ctx, id, e.poll)
}

// Withdraw implements Approvals: it cancels the requests of the call's run
// (each gated call has a run id of its own). Only the run is named, so the
// session's remembered approvals stay.
func (e *Embedded) Withdraw(ctx context.Context, req *aais.Request) error {
	if req.Origin.RunID == "" {
		return errors.New("the request has no run id to withdraw by")
	}
	_, err := e.auth.CancelOwned(ctx, aais.Owner{RunID: req.Origin.RunID})
	return err
}

// EndSession implements Approvals.
func (e *Embedded) EndSession(ctx context.Context, sessionID string) error {
	if sessionID == "" {
		return fmt.Errorf("no session")
	}
	_, err := e.auth.CancelOwned(ctx, aais.Owner{SessionID: sessionID})
	return err
}

// Close implements Approvals.
func (e *Embedded) Close() error { return e.close() }
