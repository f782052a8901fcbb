package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/gateway/exchange"
)

// Notifications are the channels that announce pending approvals and take
// decisions back (package notify, docs/notifications.md).
type Notifications struct {
	// RedactProfiles are compliance profiles whose requests are announced
	// without their values, besides those whose profile involves personal
	// data (pii_involved) and actions marked presentation.redacted.
	RedactProfiles []string         `yaml:"redact_profiles"`
	Webhooks       []WebhookChannel `yaml:"webhooks"`
	Slack          []SlackChannel   `yaml:"slack"`
	Email          []EmailChannel   `yaml:"email"`
	// Escalations remind, escalate and resolve at a deadline the pending
	// requests nobody decides (the first whose route covers a request
	// applies); ReviewEscalations do the same for overdue post-execution
	// reviews (docs/notifications.md).
	Escalations       []Escalation       `yaml:"escalations"`
	ReviewEscalations []ReviewEscalation `yaml:"review_escalations"`
}

// Escalation follows up on the pending requests its route covers. The
// durations count from the request's creation; each is optional, and
// those given must come in order.
type Escalation struct {
	Name          string        `yaml:"name"`
	Route         NotifyRoute   `yaml:"route"`
	RemindAfter   time.Duration `yaml:"remind_after"`
	EscalateAfter time.Duration `yaml:"escalate_after"`
	// EscalateTo names the channels of the second group.
	EscalateTo []string      `yaml:"escalate_to"`
	Deadline   time.Duration `yaml:"deadline"`
	// AtDeadline is "expire" (reported as expired, never as a denial) or
	// "deny" (a denial by the runtime, with DenyReason recorded).
	AtDeadline string `yaml:"at_deadline"`
	DenyReason string `yaml:"deny_reason"`
}

// ReviewEscalation follows up on the overdue reviews its route covers
// (profiles and capabilities); the durations count from the review's due
// time.
type ReviewEscalation struct {
	Name          string        `yaml:"name"`
	Route         NotifyRoute   `yaml:"route"`
	RemindAfter   time.Duration `yaml:"remind_after"`
	EscalateAfter time.Duration `yaml:"escalate_after"`
	EscalateTo    []string      `yaml:"escalate_to"`
}

// MaxDenyReason bounds an escalation's deny_reason (it becomes the
// receipt's message and the agent's reason).
const MaxDenyReason = 400

// NotifyRoute says which requests a channel announces; every non-empty
// setting must match.
type NotifyRoute struct {
	Profiles []string `yaml:"profiles"`
	// Capabilities are patterns over the action name ("payments.*").
	Capabilities []string `yaml:"capabilities"`
	// MinRisk is low, medium, high or critical.
	MinRisk string `yaml:"min_risk"`
}

// WebhookChannel posts Standard Webhooks messages to URL.
type WebhookChannel struct {
	Name string `yaml:"name"`
	URL  string `yaml:"url" secret:"url"`
	// Secret signs the deliveries: "whsec_" + base64, or env:NAME or
	// file:PATH holding it (Secret).
	Secret string `yaml:"secret" secret:"true"`
	// CallbackSecret, when set, enables decisions posted back to
	// /notify/webhook/NAME/decisions, signed with it.
	CallbackSecret string `yaml:"callback_secret" secret:"true"`
	// Reviewers maps the receiver's reviewer ids to configured reviewers.
	Reviewers map[string]string `yaml:"reviewers"`
	Route     NotifyRoute       `yaml:"route"`
}

// SlackChannel posts to a Slack conversation and takes the clicks back at
// /notify/slack/NAME/interactions.
type SlackChannel struct {
	Name string `yaml:"name"`
	// Channel is the conversation id ("C0123456789").
	Channel string `yaml:"channel"`
	// Token is the bot token; SigningSecret the app's signing secret
	// (each a value, env:NAME or file:PATH).
	Token         string `yaml:"token" secret:"true"`
	SigningSecret string `yaml:"signing_secret" secret:"true"`
	// TeamID, when set, is the only workspace accepted.
	TeamID string `yaml:"team_id"`
	// API is the Web API base URL (https://slack.com/api/ when empty).
	API string `yaml:"api"`
	// Users maps Slack user ids to configured reviewers.
	Users map[string]string `yaml:"users"`
	Route NotifyRoute       `yaml:"route"`
}

// EmailChannel sends email through an SMTP server.
type EmailChannel struct {
	Name string `yaml:"name"`
	// SMTP is the server's host:port.
	SMTP string   `yaml:"smtp"`
	From string   `yaml:"from"`
	To   []string `yaml:"to"`
	// Username and Password (value, env:NAME or file:PATH) authenticate
	// with PLAIN over TLS.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true"`
	// RequireTLS refuses a server without STARTTLS.
	RequireTLS bool        `yaml:"require_tls"`
	Route      NotifyRoute `yaml:"route"`
}

// Enabled reports whether any channel is configured.
func (n Notifications) Enabled() bool {
	return len(n.Webhooks)+len(n.Slack)+len(n.Email) > 0
}

// Secret resolves a secret setting: "env:NAME" is the variable NAME,
// "file:PATH" the file's content (trailing white space removed),
// anything else the value itself. An empty result is an error.
func Secret(v string) (string, error) {
	var s string
	switch {
	case strings.HasPrefix(v, "env:"):
		s = os.Getenv(strings.TrimPrefix(v, "env:"))
		if s == "" {
			return "", fmt.Errorf("the environment variable %s is not set", strings.TrimPrefix(v, "env:"))
		}
	case strings.HasPrefix(v, "file:"):
		b, err := os.ReadFile(strings.TrimPrefix(v, "file:"))
		if err != nil {
			return "", err
		}
		s = strings.TrimRight(string(b), " \t\r\n")
	default:
		s = v
	}
	if s == "" {
		return "", errors.New("empty")
	}
	return s, nil
}

var channelName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func (r NotifyRoute) check() error {
	for _, p := range r.Capabilities {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return fmt.Errorf("route.capabilities: %q is not a pattern", p)
		}
	}
	switch r.MinRisk {
	case "", "low", "medium", "high", "critical":
	default:
		return fmt.Errorf("route.min_risk %q: want low, medium, high or critical", r.MinRisk)
	}
	return nil
}

// checkNotifications checks the notifications settings.
func (c *Config) checkNotifications() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("notifications."+format, a...)) }
	reviewers := map[string]bool{}
	for _, r := range c.Reviewers {
		reviewers[r.ID] = true
	}
	names := map[string]bool{}
	name := func(kind string, i int, n string) string {
		at := fmt.Sprintf("%s[%d]", kind, i)
		switch {
		case !channelName.MatchString(n):
			bad("%s.name %q: want 1 to 64 of a-z, 0-9, _ and -", at, n)
		case names[n]:
			bad("%s.name %q: another channel has it", at, n)
		}
		names[n] = true
		return at
	}
	mapped := func(at, what string, m map[string]string) {
		for from, to := range m {
			if from == "" || !reviewers[to] {
				bad("%s.%s: %q maps to %q, which is not a configured reviewer", at, what, from, to)
			}
		}
	}
	// secret checks a secret setting; a webhook's (whsec) is checked
	// again when it is resolved, at start.
	secret := func(at, what, v string, required, whsec bool) {
		switch {
		case v == "":
			if required {
				bad("%s.%s: required (a value, env:NAME or file:PATH)", at, what)
			}
		case strings.HasPrefix(v, "env:"), strings.HasPrefix(v, "file:"):
		case whsec && !strings.HasPrefix(v, "whsec_"):
			bad("%s.%s: want whsec_ followed by base64 (or env:NAME, file:PATH)", at, what)
		}
	}
	for i, w := range c.Notifications.Webhooks {
		at := name("webhooks", i, w.Name)
		if err := exchange.CheckCallbackURL(w.URL); err != nil {
			bad("%s.url: %v", at, err)
		}
		secret(at, "secret", w.Secret, true, true)
		secret(at, "callback_secret", w.CallbackSecret, false, true)
		if w.CallbackSecret != "" && w.CallbackSecret == w.Secret {
			bad("%s.callback_secret: use another secret than the one that signs the deliveries", at)
		}
		if len(w.Reviewers) > 0 && w.CallbackSecret == "" {
			bad("%s.reviewers: set callback_secret to take decisions back", at)
		}
		mapped(at, "reviewers", w.Reviewers)
		if err := w.Route.check(); err != nil {
			bad("%s.%v", at, err)
		}
	}
	for i, s := range c.Notifications.Slack {
		at := name("slack", i, s.Name)
		if s.Channel == "" {
			bad("%s.channel: required (a conversation id)", at)
		}
		secret(at, "token", s.Token, true, false)
		secret(at, "signing_secret", s.SigningSecret, true, false)
		if s.API != "" {
			if err := exchange.CheckCallbackURL(s.API); err != nil {
				bad("%s.api: %v", at, err)
			}
		}
		mapped(at, "users", s.Users)
		if err := s.Route.check(); err != nil {
			bad("%s.%v", at, err)
		}
	}
	for i, e := range c.Notifications.Email {
		at := name("email", i, e.Name)
		if _, _, err := net.SplitHostPort(e.SMTP); err != nil {
			bad("%s.smtp %q: want host:port", at, e.SMTP)
		}
		if e.From == "" || len(e.To) == 0 || slices.Contains(e.To, "") {
			bad("%s: from and to are required", at)
		}
		if (e.Username == "") != (e.Password == "") {
			bad("%s: username and password go together", at)
		}
		if err := e.Route.check(); err != nil {
			bad("%s.%v", at, err)
		}
	}
	errs = append(errs, c.checkEscalations(names)...)
	return errs
}

// checkEscalations checks the escalations against the channels named.
func (c *Config) checkEscalations(channels map[string]bool) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("notifications."+format, a...)) }
	names := map[string]bool{}
	common := func(at, name string, r NotifyRoute, to []string, after time.Duration, steps ...time.Duration) {
		switch {
		case !channelName.MatchString(name):
			bad("%s.name %q: want 1 to 64 of a-z, 0-9, _ and -", at, name)
		case names[name]:
			bad("%s.name %q: another escalation has it", at, name)
		}
		names[name] = true
		if err := r.check(); err != nil {
			bad("%s.%v", at, err)
		}
		if (after > 0) != (len(to) > 0) {
			bad("%s: escalate_after and escalate_to go together", at)
		}
		for _, ch := range to {
			if !channels[ch] {
				bad("%s.escalate_to: %q is not a configured channel", at, ch)
			}
		}
		var last time.Duration
		some := false
		for _, d := range steps {
			switch {
			case d < 0:
				bad("%s: a duration is negative (%s)", at, d)
			case d > 0 && d <= last:
				bad("%s: the steps must come due in order (remind_after, escalate_after, deadline)", at)
			}
			if d > 0 {
				some, last = true, d
			}
		}
		if !some {
			bad("%s: no step is configured (remind_after, escalate_after or deadline)", at)
		}
	}
	for i, e := range c.Notifications.Escalations {
		at := fmt.Sprintf("escalations[%d]", i)
		common(at, e.Name, e.Route, e.EscalateTo, e.EscalateAfter, e.RemindAfter, e.EscalateAfter, e.Deadline)
		switch {
		case e.Deadline == 0 && (e.AtDeadline != "" || e.DenyReason != ""):
			bad("%s: at_deadline and deny_reason need a deadline", at)
		case e.Deadline > 0 && e.AtDeadline != "expire" && e.AtDeadline != "deny":
			bad("%s.at_deadline %q: want expire or deny", at, e.AtDeadline)
		case e.AtDeadline == "deny" && strings.TrimSpace(e.DenyReason) == "":
			bad("%s.deny_reason: required with at_deadline: deny (the agent is told it)", at)
		case e.AtDeadline == "expire" && e.DenyReason != "":
			bad("%s.deny_reason: only with at_deadline: deny", at)
		case utf8.RuneCountInString(e.DenyReason) > MaxDenyReason || !utf8.ValidString(e.DenyReason):
			bad("%s.deny_reason: at most %d characters of UTF-8", at, MaxDenyReason)
		}
	}
	for i, e := range c.Notifications.ReviewEscalations {
		at := fmt.Sprintf("review_escalations[%d]", i)
		common(at, e.Name, e.Route, e.EscalateTo, e.EscalateAfter, e.RemindAfter, e.EscalateAfter)
		if e.Route.MinRisk != "" {
			bad("%s.route.min_risk: a review has no risk level; route by profiles and capabilities", at)
		}
	}
	return errs
}
