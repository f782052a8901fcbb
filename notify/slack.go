package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// DefaultSlackAPI is the base URL of Slack's Web API.
const DefaultSlackAPI = "https://slack.com/api/"

// Slack action ids of the message's buttons and the justification modal.
const (
	slackApprove   = "custos_approve"
	slackDeny      = "custos_deny"
	slackOpen      = "custos_open"
	slackJustify   = "custos_justify"
	slackJustBlock = "justification"
	slackJustInput = "text"
)

// SlackOptions configures a Slack channel.
type SlackOptions struct {
	Name string
	// API is the Web API base URL (DefaultSlackAPI when empty; tests
	// point it at a fake).
	API string
	// Token is the bot token (xoxb-…) the Web API calls carry; it needs
	// chat:write (and nothing else: views.open takes the interaction's
	// trigger).
	Token string
	// Channel is the conversation id the requests are posted in.
	Channel string
	// SigningSecret is the app's signing secret, which authenticates the
	// interactions Slack posts back (button clicks, the modal).
	SigningSecret string
	// TeamID, when set, is the only workspace whose interactions are
	// accepted.
	TeamID string
	// Users maps Slack user ids to reviewer ids. A click by anyone else
	// changes nothing.
	Users map[string]string
	// Client sends the Web API calls (10 s timeout when nil).
	Client *http.Client
	Retry  *Retry
}

// Slack posts each notice to a channel with chat.postMessage, as Block
// Kit blocks: the summary, the risk, the exact action and its digest, and
// Approve and Deny buttons; when the request is resolved it replaces the
// message (chat.update) with the outcome, who decided and where, and no
// buttons. The clicks come back to Handler.
type Slack struct {
	o SlackOptions
}

// NewSlack returns a Slack channel.
func NewSlack(o SlackOptions) (*Slack, error) {
	if o.Name == "" || o.Token == "" || o.Channel == "" || o.SigningSecret == "" {
		return nil, errors.New("notify: a Slack channel needs a name, a bot token, a channel and a signing secret")
	}
	if o.API == "" {
		o.API = DefaultSlackAPI
	}
	if !strings.HasSuffix(o.API, "/") {
		o.API += "/"
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Retry == nil {
		o.Retry = &Retry{}
	}
	return &Slack{o: o}, nil
}

// Name implements Channel.
func (s *Slack) Name() string { return s.o.Name }

// Announce implements Channel: chat.postMessage; the reference is
// "channel/ts" of the posted message.
func (s *Slack) Announce(ctx context.Context, n Notice) (string, error) {
	var ans struct {
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	}
	err := s.call(ctx, "chat.postMessage", map[string]any{
		"channel": s.o.Channel, "text": fallbackText(n), "blocks": requestBlocks(n, nil), "unfurl_links": false,
	}, &ans)
	if err != nil {
		return "", err
	}
	if ans.Channel == "" || ans.TS == "" {
		return "", errors.New("slack: chat.postMessage answered without channel and ts")
	}
	return ans.Channel + "/" + ans.TS, nil
}

// Resolve implements Channel: chat.update of the announced message.
func (s *Slack) Resolve(ctx context.Context, ref string, n Notice, r Resolved) error {
	ch, ts, ok := strings.Cut(ref, "/")
	if !ok {
		return fmt.Errorf("slack: %q is not a message reference", ref)
	}
	return s.call(ctx, "chat.update", map[string]any{
		"channel": ch, "ts": ts, "text": resolvedText(n, r), "blocks": requestBlocks(n, &r),
	}, nil)
}

// ephemeral tells one user something in the channel, only them
// (chat.postEphemeral), once.
func (s *Slack) ephemeral(ctx context.Context, channel, user, text string) error {
	if channel == "" {
		channel = s.o.Channel
	}
	return s.callOnce(ctx, "chat.postEphemeral", map[string]any{"channel": channel, "user": user, "text": text}, nil)
}

// call calls a Web API method with retries: a transport failure, a 5xx
// or a 429 (after its Retry-After) is retried, an answer "ok": false is
// not.
func (s *Slack) call(ctx context.Context, method string, args, into any) error {
	return s.o.Retry.do(ctx, func(ctx context.Context) error { return s.callOnce(ctx, method, args, into) })
}

func (s *Slack) callOnce(ctx context.Context, method string, args, into any) error {
	body, err := json.Marshal(args)
	if err != nil {
		return permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.API+method, bytes.NewReader(body))
	if err != nil {
		return permanent(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+s.o.Token)
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if sec, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && sec > 0 && sec <= 60 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(sec) * time.Second):
			}
		}
		return fmt.Errorf("slack %s: rate limited", method)
	}
	if resp.StatusCode >= 500 {
		return fmt.Errorf("slack %s: %s", method, resp.Status)
	}
	var ans struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &ans) != nil {
		return permanent(fmt.Errorf("slack %s: %s", method, resp.Status))
	}
	if !ans.OK {
		return permanent(fmt.Errorf("slack %s: %s", method, ans.Error))
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			return permanent(fmt.Errorf("slack %s: %w", method, err))
		}
	}
	return nil
}

// mrkdwn escapes text for Slack's mrkdwn: &, < and > are the only
// characters Slack requires escaped, and escaping them keeps an untrusted
// summary from mentioning anyone or hiding a link.
func mrkdwn(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// code puts s in a mrkdwn code span or block, escaped; backticks cannot
// end it early because they are replaced by a look-alike.
func code(s string, block bool) string {
	s = mrkdwn(strings.ReplaceAll(s, "`", "ˋ"))
	if block {
		return "```" + s + "```"
	}
	return "`" + s + "`"
}

func plain(s string, max int) map[string]any {
	return map[string]any{"type": "plain_text", "text": truncate(s, max), "emoji": false}
}

func mdText(s string) map[string]any {
	return map[string]any{"type": "mrkdwn", "text": truncate(s, 3000), "verbatim": true}
}

// decisionValue is what a button carries: the request and the digest the
// reviewer was shown.
func decisionValue(n Notice) string { return n.RequestID + " " + n.ActionDigest }

// requestBlocks is the Block Kit message of a notice; with r, of its
// resolution (no buttons).
func requestBlocks(n Notice, r *Resolved) []map[string]any {
	title := "Approval requested: " + n.ActionName
	if r != nil {
		title = outcomeWord(r.Outcome) + ": " + n.ActionName
	}
	blocks := []map[string]any{{"type": "header", "text": plain(title, 150)}}
	var facts strings.Builder
	if n.Redacted {
		fmt.Fprintf(&facts, "*Values redacted* (%s).", mrkdwn(n.RedactedBecause))
		if n.BindingHint != "" {
			fmt.Fprintf(&facts, " Bound to: %s.", mrkdwn(n.BindingHint))
		}
		facts.WriteString(" Open the inbox to see them.")
	} else if n.Summary != "" {
		fmt.Fprintf(&facts, "*Summary* (the agent's own words): %s", mrkdwn(n.Summary))
	}
	if facts.Len() > 0 {
		blocks = append(blocks, map[string]any{"type": "section", "text": mdText(facts.String())})
	}
	fields := []map[string]any{
		mdText("*Risk:* " + mrkdwn(string(n.Risk)) + riskReasons(n.RiskReasons)),
		mdText("*Agent:* " + code(n.Agent, false)),
	}
	if n.Profile != "" {
		fields = append(fields, mdText("*Profile:* "+mrkdwn(n.Profile)))
	}
	if !n.ExpiresAt.IsZero() {
		fields = append(fields, mdText("*Expires:* "+n.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	blocks = append(blocks, map[string]any{"type": "section", "fields": fields})
	action := "*Exact action:* " + code(n.ActionKind, false) + " " + code(n.ActionName, false)
	if n.Resource != "" {
		action += " on " + code(n.Resource, false)
	}
	if n.Arguments != nil {
		action += "\n" + code(prettyArguments(n.Arguments, 2500), true)
	} else if len(n.ArgumentNames) > 0 {
		action += "\nArguments (values redacted): " + code(strings.Join(n.ArgumentNames, ", "), false)
	}
	blocks = append(blocks, map[string]any{"type": "section", "text": mdText(action)})
	blocks = append(blocks, map[string]any{"type": "context", "elements": []map[string]any{
		mdText("Digest " + code(n.ActionDigest, false) + " · request " + code(n.RequestID, false)),
	}})
	if r != nil {
		blocks = append(blocks, map[string]any{"type": "section", "text": mdText(resolutionLine(*r))})
		return blocks
	}
	var buttons []map[string]any
	if n.Approvable {
		buttons = append(buttons, map[string]any{"type": "button", "action_id": slackApprove, "style": "primary",
			"text": plain("Approve once", 75), "value": decisionValue(n)})
	}
	buttons = append(buttons, map[string]any{"type": "button", "action_id": slackDeny, "style": "danger",
		"text": plain("Deny", 75), "value": decisionValue(n)})
	if n.InboxURL != "" {
		buttons = append(buttons, map[string]any{"type": "button", "action_id": slackOpen,
			"text": plain("Open in the inbox", 75), "url": n.InboxURL})
	}
	blocks = append(blocks, map[string]any{"type": "actions", "block_id": "custos_decision", "elements": buttons})
	return blocks
}

func riskReasons(rs []string) string {
	if len(rs) == 0 {
		return ""
	}
	return " (" + mrkdwn(strings.Join(rs, "; ")) + ")"
}

func outcomeWord(o aais.Outcome) string {
	switch o {
	case aais.OutcomeApproved:
		return "Approved"
	case aais.OutcomeDenied:
		return "Denied"
	case aais.OutcomeExpired:
		return "Expired"
	case aais.OutcomeCancelled:
		return "Cancelled"
	}
	return "Resolved (" + string(o) + ")"
}

// resolutionLine says how the request ended, who decided and where.
func resolutionLine(r Resolved) string {
	s := "*" + outcomeWord(r.Outcome) + "*"
	switch {
	case r.Actor != nil:
		s += " by " + code(r.Actor.ID, false)
		if r.Actor.AuthenticatedBy != "" {
			s += " (via " + mrkdwn(r.Actor.AuthenticatedBy) + ")"
		}
	case r.RuleID != "":
		s += " by remembered rule " + code(r.RuleID, false)
	}
	s += " at " + r.ResolvedAt.UTC().Format(time.RFC3339) + "."
	if r.Justification != "" {
		s += "\n>" + mrkdwn(strings.ReplaceAll(r.Justification, "\n", " "))
	}
	if r.Actor == nil && r.Message != "" {
		s += " " + mrkdwn(r.Message)
	}
	return s
}

func fallbackText(n Notice) string {
	return fmt.Sprintf("Approval requested: %s (risk %s), request %s", n.ActionName, n.Risk, n.RequestID)
}

func resolvedText(n Notice, r Resolved) string {
	s := fmt.Sprintf("%s: %s, request %s", outcomeWord(r.Outcome), n.ActionName, n.RequestID)
	if r.Actor != nil {
		s += " by " + r.Actor.ID
	}
	return s
}

// justifyView is the modal asking for a justification before an approval.
func justifyView(n string, value string) map[string]any {
	return map[string]any{
		"type": "modal", "callback_id": slackJustify, "private_metadata": value,
		"title": plain("Approve request", 24), "submit": plain("Approve", 24), "close": plain("Cancel", 24),
		"blocks": []map[string]any{
			{"type": "section", "text": mdText("Request " + code(n, false) + " needs a written justification to be approved.")},
			{"type": "input", "block_id": slackJustBlock, "label": plain("Justification", 2000),
				"element": map[string]any{"type": "plain_text_input", "action_id": slackJustInput, "multiline": true,
					"min_length": 1, "max_length": 2000}},
		},
	}
}

// FollowUp implements FollowUpChannel: chat.postMessage of a new message.
// For a request it is the request's own message (with its buttons, so
// the group it is escalated to can decide in Slack) under a line saying
// why; it is not updated when the request resolves, and a click after
// that is answered as for any resolved request. For a review it is a line
// and a link to the inbox.
func (s *Slack) FollowUp(ctx context.Context, f FollowUp) error {
	line := mdText("*" + mrkdwn(f.Message) + "*")
	blocks := []map[string]any{{"type": "section", "text": line}}
	text := f.Message
	if f.Request != nil {
		blocks = append(blocks, requestBlocks(*f.Request, nil)...)
		text += " " + fallbackText(*f.Request)
	} else if r := f.Review; r != nil {
		facts := "*Capability:* " + code(r.Capability, false) + " · *sender:* " + code(r.Sender, false) +
			" · *profile:* " + mrkdwn(r.Profile) + " · *due:* " + r.DueAt.UTC().Format(time.RFC3339) +
			"\nExchange " + code(r.ExchangeID, false)
		blocks = append(blocks, map[string]any{"type": "section", "text": mdText(facts)})
		if r.InboxURL != "" {
			blocks = append(blocks, map[string]any{"type": "actions", "elements": []map[string]any{{"type": "button",
				"action_id": slackOpen, "text": plain("Open in the inbox", 75), "url": r.InboxURL}}})
		}
	}
	return s.call(ctx, "chat.postMessage", map[string]any{
		"channel": s.o.Channel, "text": truncate(text, 3000), "blocks": blocks, "unfurl_links": false,
	}, nil)
}
