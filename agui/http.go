package agui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/routes"
)

// ResumePath is where NewHandler is meant to be mounted.
const ResumePath = "/agui/resume"

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Authority decides (required).
	Authority *aais.Authority
	// Auth authenticates every request (required); the actor it returns
	// is the one that decides.
	Auth httpapi.Authenticator
	// Authorize, when set, is asked before deciding whether actor may
	// decide req (the reviewer policy); an error refuses the resume with
	// 403 and nothing is decided.
	Authorize func(ctx context.Context, actor aais.Actor, req *aais.Request, d *aais.Decision) error
	// CurrentAction, when set, returns the action req would run now, so
	// that a decision on an action that has changed resolves as stale.
	CurrentAction func(ctx context.Context, req *aais.Request) ([]byte, error)
	// Logger receives diagnostics (nothing is logged when nil).
	Logger *slog.Logger
}

// ResumeResponse is the body of a 200 answer.
type ResumeResponse struct {
	// Continue is true when the run goes on (approved).
	Continue bool `json:"continue"`
	// Outcome is the receipt's outcome; "pending" when the decision was
	// a vote towards a quorum (aais.QuorumExtension) and Receipt is its
	// approval.activity.
	Outcome aais.Outcome `json:"outcome"`
	// Receipt is the approval.resolved envelope.
	Receipt json.RawMessage `json:"receipt"`
}

// NewHandler returns an HTTP handler for AG-UI resumes: POST, Content-Type
// application/json, a body ParseResume accepts, credentials Auth accepts.
// It answers 200 with a ResumeResponse (also when the outcome ends the run:
// the receipt says why), or an application/problem+json with an ASC status:
// 401 unauthenticated, 403 refused by Authorize, 400 malformed, 404 unknown
// request, 405, 413, 415, 409 when the owner of the request has stopped.
//
// Requiring application/json keeps HTML forms of other origins out (they
// cannot send it without a CORS preflight, which this handler does not
// answer).
func NewHandler(o HandlerOptions) (http.Handler, error) {
	if o.Authority == nil || o.Auth == nil {
		return nil, errors.New("agui: the handler needs an authority and an authenticator")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &resumeHandler{o: o}, nil
}

type resumeHandler struct{ o HandlerOptions }

// Routes says the handler serves POST at ResumePath (any other method is
// answered 405).
func (h *resumeHandler) Routes() []routes.Route {
	return []routes.Route{{Method: http.MethodPost, Path: ResumePath}}
}

func (h *resumeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem(w, asc.InvalidRequest, http.StatusMethodNotAllowed, "Use POST.")
		return
	}
	actor, err := h.o.Auth.Authenticate(r)
	if err != nil || actor.ID == "" || actor.Type == "" {
		w.Header().Set("WWW-Authenticate", "Bearer")
		problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Authentication is required.")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, asc.InvalidRequest, http.StatusUnsupportedMediaType, "The body must be application/json.")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodySize+1))
	if err != nil {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "The body could not be read.")
		return
	}
	if len(body) > MaxBodySize {
		problem(w, asc.ResourceExhausted, http.StatusRequestEntityTooLarge, "The body is too large.")
		return
	}
	m, err := ParseResume(body)
	if err != nil {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, err.Error())
		return
	}
	st, err := h.o.Authority.State(ctx, m.Decision.RequestID)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	req := st.Request.Event.Request
	if h.o.Authorize != nil {
		if err := h.o.Authorize(ctx, actor, req, m.Decision); err != nil {
			h.o.Logger.WarnContext(ctx, "agui resume refused by policy", "request", req.ID, "actor", actor.ID, "err", err)
			problem(w, asc.PermissionDenied, http.StatusForbidden, "You may not decide this request.")
			return
		}
	}
	var current []byte
	if h.o.CurrentAction != nil {
		if current, err = h.o.CurrentAction(ctx, req); err != nil {
			h.failure(w, r, err)
			return
		}
	}
	out, err := Resume(ctx, h.o.Authority, body, actor, current)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	receipt, err := aais.Marshal(out.Receipt)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	outcome := aais.Outcome("pending") // a vote towards a quorum (an approval.activity)
	if res := out.Receipt.Resolution; res != nil {
		outcome = res.Outcome
	}
	_ = json.NewEncoder(w).Encode(ResumeResponse{Continue: out.Continue, Outcome: outcome, Receipt: receipt})
}

func (h *resumeHandler) failure(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrMalformed), errors.Is(err, aais.ErrInvalid):
		problem(w, asc.InvalidRequest, http.StatusBadRequest, err.Error())
	case errors.Is(err, aais.ErrUnknownRequest):
		problem(w, asc.NotFound, http.StatusNotFound, "No such approval request.")
	case errors.Is(err, aais.ErrOwnerStopped):
		problem(w, asc.FailedPrecondition, http.StatusConflict, "The process waiting to run this action has stopped; it cannot be approved.")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		problem(w, asc.Timeout, http.StatusServiceUnavailable, "The request was cancelled.")
	default:
		h.o.Logger.ErrorContext(r.Context(), "agui resume", "err", err)
		problem(w, asc.InternalError, http.StatusInternalServerError, "The approval store failed; nothing was decided.")
	}
}

func problem(w http.ResponseWriter, code asc.Code, status int, detail string) {
	e := asc.Errorf(code, asc.ScopeTask, "%s", detail)
	p := asc.ToProblem(&e.Envelope)
	p.Status = status
	p.Detail = detail
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}
