package notify

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/jcs"
)

// CallbackDecision is the body of a decision posted back to a webhook
// channel's callback URL.
type CallbackDecision struct {
	// RequestID and ActionDigest name the request and the action the
	// reviewer was shown (the notice's request_id and action_digest).
	RequestID    string `json:"request_id"`
	ActionDigest string `json:"action_digest"`
	// Decision is "approve" or "deny" (scope once).
	Decision aais.Verdict `json:"decision"`
	// Reviewer is the reviewer's id in the receiving system, which the
	// channel maps to a configured reviewer.
	Reviewer      string `json:"reviewer"`
	Justification string `json:"justification,omitempty"`
}

// CallbackOptions configures a webhook channel's inbound decisions.
type CallbackOptions struct {
	// Secrets verify the callbacks' Standard Webhooks signatures (more
	// than one during a rotation). Required.
	Secrets []WebhookSecret
	// Reviewers maps the receiving system's reviewer ids to configured
	// reviewer ids.
	Reviewers map[string]string
}

// CallbackHandler returns the handler of decisions posted back by the
// system a webhook channel notifies: a CallbackDecision as JSON, signed
// the Standard Webhooks way with one of o.Secrets, within Tolerance, its
// webhook-id never seen before, by a reviewer o maps. The decision then
// goes through d's Decider. The answer is 200 with the AAIS receipt (409
// for a conflict), or an error (401 unverified, 403 unmapped or refused by
// the policy, 400 malformed, 404 unknown request, 409 not pending);
// anything refused changes nothing and is logged.
func (w *Webhook) CallbackHandler(d *Decisions, o CallbackOptions) (http.Handler, error) {
	if len(o.Secrets) == 0 {
		return nil, errors.New("notify: webhook callbacks need a secret")
	}
	replays := &Replays{}
	via := "webhook/" + w.o.Name
	name := w.o.Name
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Method != http.MethodPost {
			rw.Header().Set("Allow", http.MethodPost)
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxInteraction))
		if err != nil {
			d.refuse(ctx, rw, http.StatusRequestEntityTooLarge, name, "body too large or unreadable", err)
			return
		}
		now := d.now()
		id, err := VerifyWebhook(r.Header, body, now, o.Secrets...)
		if err != nil {
			d.refuse(ctx, rw, http.StatusUnauthorized, name, "signature check failed", err)
			return
		}
		if !replays.First(id, now) {
			d.refuse(ctx, rw, http.StatusUnauthorized, name, "replayed webhook-id", nil)
			return
		}
		var in CallbackDecision
		if _, err := jcs.Decode(body); err != nil {
			d.refuse(ctx, rw, http.StatusBadRequest, name, "not JSON", err)
			return
		}
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || in.RequestID == "" || in.ActionDigest == "" ||
			(in.Decision != aais.Approve && in.Decision != aais.Deny) {
			d.refuse(ctx, rw, http.StatusBadRequest, name, `want {"request_id", "action_digest", "decision": "approve"|"deny", "reviewer", "justification"}`, err)
			return
		}
		actor, ok := d.reviewer(o.Reviewers[in.Reviewer], via)
		if !ok {
			d.refuse(ctx, rw, http.StatusForbidden, name, "the reviewer is not mapped to a configured reviewer", nil)
			return
		}
		receipt, err := d.decide(ctx, in.RequestID, in.ActionDigest, in.Decision, actor, strings.TrimSpace(in.Justification))
		if err != nil {
			status := http.StatusForbidden
			var rf *Refusal
			switch {
			case errors.As(err, &rf):
				status = rf.Status
			case errors.Is(err, aais.ErrUnknownRequest):
				status = http.StatusNotFound
			case errors.Is(err, errNotPending):
				status = http.StatusConflict
			case errors.Is(err, aais.ErrInvalid):
				status = http.StatusBadRequest
			default:
				status = http.StatusInternalServerError
			}
			d.refuse(ctx, rw, status, name, "decision refused: "+reason(err), err)
			return
		}
		b, err := aais.Marshal(receipt)
		if err != nil {
			http.Error(rw, "the receipt could not be encoded", http.StatusInternalServerError)
			return
		}
		status := http.StatusOK
		switch {
		case aais.Partial(receipt):
			status = http.StatusAccepted // a vote towards a quorum
		case receipt.Resolution.Outcome == aais.OutcomeConflict:
			status = http.StatusConflict
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(status)
		_, _ = rw.Write(b)
	}), nil
}
