package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// slackInteraction is the part of a Slack interaction payload the handler
// reads (block_actions and view_submission).
type slackInteraction struct {
	Type string `json:"type"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	TriggerID string `json:"trigger_id"`
	Channel   struct {
		ID string `json:"id"`
	} `json:"channel"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
	View struct {
		CallbackID      string `json:"callback_id"`
		PrivateMetadata string `json:"private_metadata"`
		State           struct {
			Values map[string]map[string]struct {
				Value string `json:"value"`
			} `json:"values"`
		} `json:"state"`
	} `json:"view"`
}

// maxInteraction caps an interaction body.
const maxInteraction = 64 << 10

// Handler returns the handler of the app's Interactivity Request URL. It
// accepts only requests signed with the signing secret
// (X-Slack-Signature over "v0:" + X-Slack-Request-Timestamp + ":" +
// body) within Tolerance and never seen before, from a Slack user the
// channel maps to a configured reviewer; the decision then goes through
// d's Decider like every other. Approve with a profile that requires a
// justification opens a modal asking for it; the approval is decided when
// the modal is submitted. Anything refused changes nothing, is answered
// with an HTTP error (an unverified request learns nothing more) and is
// logged; a verified reviewer is also told why, in an ephemeral message.
func (s *Slack) Handler(d *Decisions) http.Handler {
	replays := &Replays{}
	via := "slack/" + s.o.Name
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInteraction))
		if err != nil {
			d.refuse(ctx, w, http.StatusRequestEntityTooLarge, s.o.Name, "body too large or unreadable", err)
			return
		}
		now := d.now()
		ts, err := VerifySlack(r.Header, body, now, s.o.SigningSecret)
		if err != nil {
			d.refuse(ctx, w, http.StatusUnauthorized, s.o.Name, "signature check failed", err)
			return
		}
		if !replays.First(ts+" "+r.Header.Get(HeaderSlackSignature), now) {
			d.refuse(ctx, w, http.StatusUnauthorized, s.o.Name, "replayed request", nil)
			return
		}
		form, err := url.ParseQuery(string(body))
		var in slackInteraction
		if err != nil || json.Unmarshal([]byte(form.Get("payload")), &in) != nil {
			d.refuse(ctx, w, http.StatusBadRequest, s.o.Name, "not an interaction payload", err)
			return
		}
		if s.o.TeamID != "" && in.Team.ID != s.o.TeamID {
			d.refuse(ctx, w, http.StatusForbidden, s.o.Name, "interaction from another workspace", nil)
			return
		}
		reviewerID := s.o.Users[in.User.ID]
		actor, ok := d.reviewer(reviewerID, via)
		if !ok {
			s.tell(ctx, in.Channel.ID, in.User.ID, "You are not a Custos reviewer here; nothing was decided.")
			d.refuse(ctx, w, http.StatusForbidden, s.o.Name, "the Slack user is not mapped to a reviewer", nil)
			return
		}
		switch in.Type {
		case "block_actions":
			s.clicked(ctx, w, d, in, actor)
		case "view_submission":
			s.submitted(ctx, w, d, in, actor)
		default:
			d.refuse(ctx, w, http.StatusBadRequest, s.o.Name, "unsupported interaction "+in.Type, nil)
		}
	})
}

// clicked handles a button.
func (s *Slack) clicked(ctx context.Context, w http.ResponseWriter, d *Decisions, in slackInteraction, actor aais.Actor) {
	if len(in.Actions) != 1 {
		d.refuse(ctx, w, http.StatusBadRequest, s.o.Name, "want exactly one action", nil)
		return
	}
	act := in.Actions[0]
	var v aais.Verdict
	switch act.ActionID {
	case slackOpen:
		w.WriteHeader(http.StatusOK) // a link; the browser opens it
		return
	case slackApprove:
		v = aais.Approve
	case slackDeny:
		v = aais.Deny
	default:
		d.refuse(ctx, w, http.StatusBadRequest, s.o.Name, "unknown action "+act.ActionID, nil)
		return
	}
	id, digest, ok := strings.Cut(act.Value, " ")
	if !ok || id == "" || digest == "" {
		d.refuse(ctx, w, http.StatusBadRequest, s.o.Name, "malformed button value", nil)
		return
	}
	if v == aais.Approve && d.JustificationRequired != nil {
		req, err := d.request(ctx, id)
		if err != nil {
			s.decisionFailed(ctx, w, d, in, actor, err)
			return
		}
		if d.JustificationRequired(actor, req) {
			if err := s.callOnce(ctx, "views.open", map[string]any{"trigger_id": in.TriggerID, "view": justifyView(id, act.Value)}, nil); err != nil {
				d.refuse(ctx, w, http.StatusBadGateway, s.o.Name, "could not open the justification modal", err)
				return
			}
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	receipt, err := d.decide(ctx, id, digest, v, actor, "")
	if err != nil {
		s.decisionFailed(ctx, w, d, in, actor, err)
		return
	}
	s.tell(ctx, in.Channel.ID, in.User.ID, outcomeText(receipt))
	w.WriteHeader(http.StatusOK)
}

// submitted handles the justification modal.
func (s *Slack) submitted(ctx context.Context, w http.ResponseWriter, d *Decisions, in slackInteraction, actor aais.Actor) {
	if in.View.CallbackID != slackJustify {
		d.refuse(ctx, w, http.StatusBadRequest, s.o.Name, "unknown view "+in.View.CallbackID, nil)
		return
	}
	id, digest, ok := strings.Cut(in.View.PrivateMetadata, " ")
	if !ok || id == "" || digest == "" {
		d.refuse(ctx, w, http.StatusBadRequest, s.o.Name, "malformed view metadata", nil)
		return
	}
	just := strings.TrimSpace(in.View.State.Values[slackJustBlock][slackJustInput].Value)
	receipt, err := d.decide(ctx, id, digest, aais.Approve, actor, just)
	if err != nil {
		// The modal shows the reason next to the field and stays open.
		d.logger().WarnContext(ctx, "notifications: decision refused", "channel", s.o.Name, "request", id, "actor", actor.ID, "err", err)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"response_action": "errors",
			"errors": map[string]string{slackJustBlock: truncate(reason(err), 150)}})
		return
	}
	s.tell(ctx, in.Channel.ID, in.User.ID, outcomeText(receipt))
	w.WriteHeader(http.StatusOK)
}

// decisionFailed answers a decision the runtime refused.
func (s *Slack) decisionFailed(ctx context.Context, w http.ResponseWriter, d *Decisions, in slackInteraction, actor aais.Actor, err error) {
	s.tell(ctx, in.Channel.ID, in.User.ID, "Nothing was decided: "+reason(err))
	status := http.StatusForbidden
	if errors.Is(err, aais.ErrUnknownRequest) {
		status = http.StatusNotFound
	} else if errors.Is(err, errNotPending) {
		status = http.StatusConflict
	}
	d.refuse(ctx, w, status, s.o.Name, "decision refused for "+actor.ID, err)
}

// tell sends a verified user an ephemeral message, without holding up the
// answer Slack waits for (3 s).
func (s *Slack) tell(ctx context.Context, channel, user, text string) {
	if user == "" {
		return
	}
	go func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = s.ephemeral(c, channel, user, text)
	}()
}
