package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// editBody is the body of POST /approvals/{id}/edits.
type editBody struct {
	Arguments     json.RawMessage `json:"arguments"`
	Justification string          `json:"justification"`
}

// edit answers POST /approvals/{id}/edits: the caller proposes other
// arguments for a pending request (edit, then approve). The authority
// cancels the request as superseded and creates a new one carrying the
// edited arguments (aais.Authority.Supersede), which needs its own
// decision; under separation of duties, not the proposer's. The answer is
// 201 {"cancelled": the original's receipt, "created": the new request's
// approval.requested event}.
//
// The caller must be allowed to decide the request (its roles cover it);
// a cookie session needs the CSRF token and an allowed Origin, as for
// decisions. A profile that requires a justification for approvals
// requires one for edits too.
func (a *approvals) edit(w http.ResponseWriter, r *http.Request) {
	if !a.origins.allowed(r, false) {
		problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not propose edits.")
		return
	}
	raw, ok := readJSON(w, r, a.o.MaxBody, `{"arguments": {...}, "justification": "..."}`)
	if !ok {
		return
	}
	var body editBody
	if err := decodeObject(raw, &body, "arguments", "justification"); err != nil {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, `The body must be {"arguments": {...}, "justification": "..."}.`)
		return
	}
	if t := bytes.TrimSpace(body.Arguments); len(t) == 0 || t[0] != '{' {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "arguments must be a JSON object.")
		return
	}
	ctx := r.Context()
	actor := a.actor(r)
	id := r.PathValue("id")
	st, err := a.o.Authority.State(ctx, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	req := st.Request.Event.Request
	just := strings.TrimSpace(body.Justification)
	if f := a.o.Policy.editCheck(actor, req, just); f != nil {
		a.o.Logger.WarnContext(ctx, "edit refused by policy", "request", req.ID, "actor", actor.ID, "reason", f.detail)
		problem(w, f.code, f.status, f.detail)
		return
	}
	cancelled, created, err := a.o.Authority.Supersede(ctx, req.ID, body.Arguments, actor, just)
	if err != nil {
		f := a.editFailure(ctx, err)
		problem(w, f.code, f.status, f.detail)
		return
	}
	a.o.Logger.InfoContext(ctx, "arguments edited", "request", req.ID, "new_request", created.Request.ID, "by", actor.ID)
	c, err := aais.Marshal(cancelled)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	n, err := aais.Marshal(created)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]json.RawMessage{"cancelled": c, "created": n})
}

// editFailure answers an error of Supersede.
func (a *approvals) editFailure(ctx context.Context, err error) *failure {
	switch {
	case errors.Is(err, aais.ErrNotPending):
		return &failure{http.StatusConflict, asc.Conflict, "The request is no longer pending; it cannot be edited: " + err.Error()}
	case errors.Is(err, aais.ErrConflict):
		return &failure{http.StatusConflict, asc.Conflict, "The edit could not be recorded; retry."}
	}
	return a.failure(ctx, err)
}

// supersessionCheck refuses the approval of a request that supersedes one
// still pending: the edit that created it did not complete (see
// aais.Authority.Supersede), so nothing waits on it.
func (a *approvals) supersessionCheck(ctx context.Context, req *aais.Request, d *aais.Decision) *failure {
	if d.Decision != aais.Approve {
		return nil
	}
	err := a.o.Authority.CheckSupersession(ctx, req)
	if errors.Is(err, aais.ErrSupersessionIncomplete) {
		return &failure{http.StatusConflict, asc.FailedPrecondition, "The edit that created this request did not complete; it cannot be approved."}
	}
	if err != nil {
		return a.failure(ctx, err)
	}
	return nil
}

// supersededBy names the request that superseded a resolved one, "" when
// none did.
func supersededBy(res *aais.Resolution) string {
	if ref, ok := aais.SupersededBy(res); ok {
		return ref.RequestID
	}
	return ""
}
