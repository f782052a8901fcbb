package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/internal/routes"
)

// SubmitOptions configures the request endpoints NewSubmit serves: how a
// requester in another process (custos mcp-proxy with authority:) asks
// this authority for a human decision and waits for it.
type SubmitOptions struct {
	// Authority records the requests (required).
	Authority *aais.Authority
	// Auth authenticates every call, by "Authorization: Bearer TOKEN"
	// (required). Browser sessions are not accepted here.
	Auth Authenticator
	// ReservedHarnesses are origin.harness values a submitted request may
	// not use, because this process's own requests use them: a request
	// under the gateway's harness could share its session rules. Nil means
	// {"custos"}, the gateway's.
	ReservedHarnesses []string
	// Policy is the reviewer policy (roles): who may withdraw a request
	// they did not submit. Nil lets every caller withdraw every request,
	// as it lets every reviewer decide every one.
	Policy *Policy
	// MaxBody caps a submitted request (1 MiB when zero); MaxWait caps a
	// long poll (60 s when zero).
	MaxBody int64
	MaxWait time.Duration
	// Logger receives diagnostics (nothing is logged when nil).
	Logger *slog.Logger
}

type submit struct{ o SubmitOptions }

// NewSubmit returns the handler of
//
//	POST /approvals/requests                 an approval.requested envelope in;
//	                                         202 with the request event as
//	                                         recorded while it is pending, or
//	                                         200 with the approval.resolved
//	                                         receipt when a remembered rule
//	                                         approved it at once
//	GET  /approvals/requests/{id}[?wait=D]   202 with the request event while
//	                                         pending, 200 with the receipt once
//	                                         resolved; with wait (a Go
//	                                         duration, at most MaxWait) the
//	                                         answer waits for the resolution
//	POST /approvals/requests/{id}/withdraw   cancels the pending requests of
//	                                         the request's run (origin.run_id)
//	                                         and answers its receipt
//
// Every call needs a bearer token that Auth accepts (the reviewers' API
// tokens). A submitted request may offer session and persistent choices
// only as the Authority's remember policy allows (without one, no
// persistent choice: a rule outliving the requester could approve other
// processes' actions; 400 saying which entry refused what), may not
// use a reserved harness, and may carry the custos.dev/exchange extension
// only with a profile member. The authenticated caller is recorded on the
// request (extension custos.dev/submitter, SubmitterExtension), so that
// separation of duties refuses the submitter's own approval and only the
// submitter (or a reviewer who may decide the request) may withdraw it. A
// withdrawal cancels the pending requests of the run only when the caller
// may withdraw each of them and they all come from the same harness;
// otherwise nothing is cancelled (403, or 409 for another harness). Errors are problem documents with their ASC
// status: 401, 400/413/415 INVALID_REQUEST, 404 NOT_FOUND, 409 CONFLICT (the
// id is taken by another request; a request without run id to withdraw by),
// 500.
//
// Mount it ahead of NewApprovals' "/approvals/" on the same mux:
//
//	mux.Handle("/approvals/requests", submit)
//	mux.Handle("/approvals/requests/", submit)
func NewSubmit(o SubmitOptions) (http.Handler, error) {
	if o.Authority == nil || o.Auth == nil {
		return nil, errors.New("httpapi: submit needs an authority and an authenticator")
	}
	if o.ReservedHarnesses == nil {
		o.ReservedHarnesses = []string{"custos"}
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &submit{o: o}
	mux := routes.New()
	mux.HandleFunc("POST /approvals/requests", s.create)
	mux.HandleFunc("GET /approvals/requests/{id}", s.state)
	mux.HandleFunc("POST /approvals/requests/{id}/withdraw", s.withdraw)
	return routes.With(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, err := o.Auth.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="custos"`)
			problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Authentication is required.")
			return
		}
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, actor)))
	}), mux), nil
}

func (s *submit) create(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSON(w, r, s.o.MaxBody, "the approval.requested envelope")
	if !ok {
		return
	}
	m, err := aais.Parse(body)
	if err != nil {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "Not a valid AAIS message: "+err.Error())
		return
	}
	if m.Type != aais.TypeRequested {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, fmt.Sprintf("Expected approval.requested, got %s.", m.Type))
		return
	}
	req := m.Request
	if detail := s.refusal(req); detail != "" {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, detail)
		return
	}
	actor, _ := r.Context().Value(actorKey{}).(aais.Actor)
	// Who submitted it is recorded on the request itself: the store keeps
	// it with the request, and an edit carries it over to the new one.
	submitter, err := json.Marshal(aais.Actor{ID: actor.ID, Type: actor.Type, AuthenticatedBy: actor.AuthenticatedBy})
	if err != nil || actor.ID == "" {
		problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Authentication is required.")
		return
	}
	ext := make(aais.Extensions, len(req.Extensions)+1)
	for k, v := range req.Extensions {
		ext[k] = v
	}
	ext[SubmitterExtension] = submitter
	req.Extensions = ext
	sub, err := s.o.Authority.Submit(r.Context(), req)
	switch {
	case errors.Is(err, aais.ErrConflict):
		problem(w, asc.Conflict, http.StatusConflict, "The request id is already used by a different request.")
		return
	case errors.Is(err, aais.ErrInvalid):
		problem(w, asc.InvalidRequest, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	s.o.Logger.InfoContext(r.Context(), "approval request submitted", "request", req.ID, "action", req.Action.Name(),
		"harness", req.Origin.Harness, "session", req.Origin.SessionID, "by", actor.ID, "created", sub.Created)
	if sub.Receipt != nil {
		writeMessage(w, http.StatusOK, sub.Receipt)
		return
	}
	writeMessage(w, http.StatusAccepted, sub.Event)
}

// refusal says why a submitted request is not accepted ("" when it is).
func (s *submit) refusal(req *aais.Request) string {
	// Case does not make another harness: "Custos" would share the
	// gateway's session rules in any consumer that folds case.
	if slices.ContainsFunc(s.o.ReservedHarnesses, func(h string) bool { return strings.EqualFold(h, req.Origin.Harness) }) {
		return fmt.Sprintf("origin.harness %q is reserved for this server's own requests.", req.Origin.Harness)
	}
	for _, c := range req.Choices {
		// A rule outliving the requester could approve other processes'
		// actions: only a remember policy may allow that, and the
		// Authority holds the request to it.
		if c.Scope == aais.ScopePersistent && !s.o.Authority.Remembers() {
			return "Submitted requests may not offer persistent approvals unless the server's remember policy (oversight.remember) allows them; offer once or session choices."
		}
	}
	if _, ok := req.Extensions[SubmitterExtension]; ok {
		return "The " + SubmitterExtension + " extension is recorded by this server; a submitted request may not carry it."
	}
	if raw, ok := req.Extensions[ExchangeExtension]; ok {
		var ext map[string]json.RawMessage
		if json.Unmarshal(raw, &ext) != nil {
			return "The custos.dev/exchange extension must be an object."
		}
		for k := range ext {
			if k != "profile" {
				return "The custos.dev/exchange extension of a submitted request may carry only profile."
			}
		}
	}
	return ""
}

func (s *submit) state(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			problem(w, asc.InvalidRequest, http.StatusBadRequest, "wait: a duration such as 25s.")
			return
		}
		wait = min(d, s.o.MaxWait)
	}
	ctx := r.Context()
	id := r.PathValue("id")
	st, err := s.o.Authority.State(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if st.Resolution != nil {
		writeMessage(w, http.StatusOK, st.Resolution.Event)
		return
	}
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		receipt, err := s.o.Authority.Wait(wctx, id, 250*time.Millisecond)
		cancel()
		switch {
		case err == nil:
			writeMessage(w, http.StatusOK, receipt)
			return
		case ctx.Err() != nil:
			return // the client went away
		case !errors.Is(err, context.DeadlineExceeded):
			s.fail(w, r, err)
			return
		}
	}
	writeMessage(w, http.StatusAccepted, st.Request.Event)
}

func (s *submit) withdraw(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	actor, _ := r.Context().Value(actorKey{}).(aais.Actor)
	st, err := s.o.Authority.State(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req := st.Request.Event.Request
	if f := s.o.Policy.withdrawCheck(actor, req); f != nil {
		s.o.Logger.WarnContext(ctx, "withdrawal refused by policy", "request", req.ID, "actor", actor.ID, "reason", f.detail)
		problem(w, f.code, f.status, f.detail)
		return
	}
	if st.Resolution == nil {
		run := req.Origin.RunID
		if run == "" {
			problem(w, asc.Conflict, http.StatusConflict, "The request names no run to withdraw it by; deny it instead.")
			return
		}
		ids, f := s.runCheck(ctx, actor, req)
		if f != nil {
			s.o.Logger.WarnContext(ctx, "withdrawal refused", "request", req.ID, "run", run, "actor", actor.ID, "reason", f.detail)
			problem(w, f.code, f.status, f.detail)
			return
		}
		// Exactly the requests checked: one submitted meanwhile under the
		// same run id is not the caller's to withdraw unseen.
		for _, id := range ids {
			if _, _, err := s.o.Authority.Withdraw(ctx, id, "Withdrawn: its run ended."); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		if st, err = s.o.Authority.State(ctx, id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if st.Resolution == nil {
		s.fail(w, r, errors.New("the request is still pending after its withdrawal"))
		return
	}
	writeMessage(w, http.StatusOK, st.Resolution.Event)
}

// runCheck says whether actor may cancel every pending request of req's
// run, and returns their ids (req's first): a withdrawal cancels the
// run's requests, and a run id is only a string the submitter chose, so
// another harness's or another submitter's request may carry the same
// one. Nothing is cancelled unless each pending request of the run is of
// req's harness and one actor may withdraw; then exactly those are
// (aais.Authority.Withdraw, one by one), not one submitted after the
// check, nor one expired or orphaned, which keeps its own outcome.
func (s *submit) runCheck(ctx context.Context, actor aais.Actor, req *aais.Request) ([]string, *failure) {
	snap, err := s.o.Authority.Snapshot(ctx)
	if err != nil {
		return nil, &failure{http.StatusInternalServerError, asc.InternalError, "The approval store failed; nothing was withdrawn."}
	}
	ids := []string{req.ID}
	for i := range snap.Snapshot.Pending {
		p := &snap.Snapshot.Pending[i]
		if p.ID == req.ID || p.Origin.RunID != req.Origin.RunID {
			continue
		}
		if p.Origin.Harness != req.Origin.Harness {
			return nil, &failure{http.StatusConflict, asc.Conflict,
				"Another harness's request uses the same run id; nothing was withdrawn. Deny the request instead."}
		}
		if f := s.o.Policy.withdrawCheck(actor, p); f != nil {
			return nil, &failure{http.StatusForbidden, asc.PermissionDenied,
				"Another request of the same run is not yours to withdraw; nothing was withdrawn."}
		}
		ids = append(ids, p.ID)
	}
	return ids, nil
}

func (s *submit) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, aais.ErrUnknownRequest):
		problem(w, asc.NotFound, http.StatusNotFound, "No such approval request.")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		problem(w, asc.Timeout, http.StatusServiceUnavailable, "The request was cancelled.")
	default:
		s.o.Logger.ErrorContext(r.Context(), "approval requests", "err", err)
		problem(w, asc.InternalError, http.StatusInternalServerError, "The approval store failed.")
	}
}
