package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/routes"
)

// ReviewQueue is the post-execution review queue (*gateway.Gateway).
type ReviewQueue interface {
	Reviews(ctx context.Context, f exchange.ReviewFilter) ([]exchange.Review, error)
	Review(ctx context.Context, exchangeID string) (exchange.Review, error)
	// CompleteReview records the first verdict; a later one gets
	// gateway.ErrReviewed.
	CompleteReview(ctx context.Context, exchangeID string, reviewer audit.Actor, v exchange.Verdict, justification string) (exchange.Review, error)
}

// ReviewsOptions configures the review queue endpoints.
type ReviewsOptions struct {
	Gateway ReviewQueue
	// Auth establishes the reviewer: the verdict is recorded under the
	// authenticated identity, never one named in the body.
	Auth Authenticator
	// Policy says who may give a verdict (Policy.ReviewPermission: roles
	// covering the call's capability and profile; under separation of
	// duties, not its sender). Nil lets every reviewer review every call.
	Policy *Policy
	// Now is the clock of "overdue" (time.Now when nil).
	Now func() time.Time
}

// NewReviews returns the handler of the post-execution review queue, for
// the compliance profiles whose human oversight comes after execution
// (required_post_execution, required_within_24h):
//
//	GET  /v1/reviews?state=open|overdue|all   the reviews, due first
//	GET  /v1/reviews/{exchange}               one review
//	POST /v1/reviews/{exchange}               {"verdict": "accepted"|"flagged", "justification": "..."}
//
// Every endpoint needs an authenticated reviewer; a verdict, one the
// policy allows on that review (403 PERMISSION_DENIED otherwise, and
// nothing is recorded). The first verdict is final (409 for another).
func NewReviews(o ReviewsOptions) (http.Handler, error) {
	if o.Gateway == nil || o.Auth == nil {
		return nil, errors.New("httpapi: reviews need a gateway and an authenticator")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	mux := routes.New()
	auth := func(next func(http.ResponseWriter, *http.Request, audit.Actor)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			a, err := o.Auth.Authenticate(r)
			if errors.Is(err, ErrCSRF) {
				problem(w, asc.PermissionDenied, http.StatusForbidden, "A signed-in browser must send the CSRF token and an allowed Origin.")
				return
			}
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="custos"`)
				problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Send a reviewer's credentials.")
				return
			}
			ctx := context.WithValue(r.Context(), actorKey{}, a)
			next(w, r.WithContext(ctx), audit.Actor{ID: a.ID, Type: string(a.Type), AuthenticatedBy: a.AuthenticatedBy})
		}
	}
	// view is a review as the caller sees it: with whether they may give
	// a verdict while it is open.
	view := func(r *http.Request, rv exchange.Review) reviewJSON {
		out := reviewOf(rv, o.Now())
		if rv.Open() {
			who, _ := r.Context().Value(actorKey{}).(aais.Actor)
			perm := o.Policy.ReviewPermission(who, ReviewSubject{Capability: rv.Capability, Profile: rv.Profile, Sender: rv.Sender})
			may := perm.Decide && perm.Approve
			out.MayReview = &may
			if !may {
				out.Refusal = perm.Reason
			}
		}
		return out
	}
	mux.HandleFunc("GET /v1/reviews", auth(func(w http.ResponseWriter, r *http.Request, _ audit.Actor) {
		f := exchange.ReviewFilter{Limit: 500}
		switch r.URL.Query().Get("state") {
		case "", "open":
			f.Open = true
		case "overdue":
			f.Overdue = o.Now()
		case "all":
		default:
			problem(w, asc.InvalidRequest, http.StatusBadRequest, "state must be open, overdue or all.")
			return
		}
		rs, err := o.Gateway.Reviews(r.Context(), f)
		if err != nil {
			problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "The review queue is unavailable.")
			return
		}
		out := make([]reviewJSON, 0, len(rs))
		for _, rv := range rs {
			out = append(out, view(r, rv))
		}
		writeJSON(w, http.StatusOK, map[string]any{"reviews": out})
	}))
	mux.HandleFunc("GET /v1/reviews/{id}", auth(func(w http.ResponseWriter, r *http.Request, _ audit.Actor) {
		rv, err := o.Gateway.Review(r.Context(), r.PathValue("id"))
		if err != nil {
			reviewFailure(w, err)
			return
		}
		writeJSON(w, http.StatusOK, view(r, rv))
	}))
	mux.HandleFunc("POST /v1/reviews/{id}", auth(func(w http.ResponseWriter, r *http.Request, actor audit.Actor) {
		var body struct {
			Verdict       exchange.Verdict `json:"verdict"`
			Justification string           `json:"justification"`
		}
		const shape = "The body must be {\"verdict\": \"accepted\"|\"flagged\", \"justification\": \"...\"}"
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBody))
		if err != nil {
			problem(w, asc.InvalidRequest, http.StatusRequestEntityTooLarge, fmt.Sprintf("The body is larger than %d bytes.", maxReviewBody))
			return
		}
		if err := decodeObject(raw, &body, "verdict", "justification"); err != nil {
			problem(w, asc.InvalidRequest, http.StatusBadRequest, shape+": "+err.Error()+".")
			return
		}
		if body.Verdict != exchange.Accepted && body.Verdict != exchange.Flagged {
			problem(w, asc.InvalidRequest, http.StatusBadRequest, shape+".")
			return
		}
		ctx := r.Context()
		rv, err := o.Gateway.Review(ctx, r.PathValue("id"))
		if err != nil {
			reviewFailure(w, err)
			return
		}
		who, _ := ctx.Value(actorKey{}).(aais.Actor)
		subj := ReviewSubject{Capability: rv.Capability, Profile: rv.Profile, Sender: rv.Sender}
		if f := o.Policy.reviewCheck(who, subj, body.Verdict == exchange.Accepted, body.Justification); f != nil {
			problem(w, f.code, f.status, f.detail)
			return
		}
		rv, err = o.Gateway.CompleteReview(ctx, rv.ExchangeID, actor, body.Verdict, body.Justification)
		if err != nil {
			reviewFailure(w, err)
			return
		}
		writeJSON(w, http.StatusOK, reviewOf(rv, o.Now()))
	}))
	return mux, nil
}

// maxReviewBody caps a verdict's body.
const maxReviewBody = 16 << 10

// reviewJSON is a review on the wire.
type reviewJSON struct {
	ExchangeID    string     `json:"exchange_id"`
	Mode          string     `json:"mode"`
	Profile       string     `json:"profile,omitempty"`
	Sender        string     `json:"sender"`
	Capability    string     `json:"capability"`
	Outcome       string     `json:"outcome"`
	CreatedAt     time.Time  `json:"created_at"`
	DueAt         time.Time  `json:"due_at"`
	Overdue       bool       `json:"overdue"`
	TimedOut      bool       `json:"oversight_timeout"`
	ReviewedAt    *time.Time `json:"reviewed_at,omitempty"`
	Reviewer      string     `json:"reviewer,omitempty"`
	Verdict       string     `json:"verdict,omitempty"`
	Justification string     `json:"justification,omitempty"`
	// MayReview says whether the caller may give a verdict on an open
	// review (the policy); Refusal says why not.
	MayReview *bool  `json:"may_review,omitempty"`
	Refusal   string `json:"refusal,omitempty"`
}

func reviewOf(r exchange.Review, now time.Time) reviewJSON {
	out := reviewJSON{ExchangeID: r.ExchangeID, Mode: r.Mode, Profile: r.Profile, Sender: r.Sender, Capability: r.Capability,
		Outcome: string(r.Outcome), CreatedAt: r.CreatedAt, DueAt: r.DueAt, Overdue: r.Overdue(now), TimedOut: r.TimedOut,
		Reviewer: r.Reviewer, Verdict: string(r.Verdict), Justification: r.Justification}
	if !r.Open() {
		t := r.ReviewedAt
		out.ReviewedAt = &t
	}
	return out
}

func reviewFailure(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, exchange.ErrNotFound):
		problem(w, asc.NotFound, http.StatusNotFound, "No review for that exchange.")
	case errors.Is(err, exchange.ErrInvalid):
		problem(w, asc.InvalidRequest, http.StatusBadRequest, err.Error())
	case errors.Is(err, gateway.ErrReviewed):
		problem(w, asc.Conflict, http.StatusConflict, err.Error())
	default:
		problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "The review could not be recorded; retry.")
	}
}
