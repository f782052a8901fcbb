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
}

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
	return errs
}
