package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway"
)

// Notice is what a channel announces about one pending request: what the
// inbox shows, with what may not leave the runtime taken out.
type Notice struct {
	// ID identifies this notice: the same for every delivery of the
	// announcement of one request ("ntf_" + the request id + ".requested"),
	// so a receiver can drop a duplicate.
	ID        string `json:"id"`
	RequestID string `json:"request_id"`
	Sequence  uint64 `json:"sequence"`
	// ActionKind, ActionName and ActionDigest say exactly what would run.
	ActionKind   string `json:"action_kind"`
	ActionName   string `json:"action_name,omitempty"`
	ActionDigest string `json:"action_digest"`
	// Summary is the agent's own description (untrusted); "" when
	// Redacted.
	Summary string `json:"summary,omitempty"`
	// Arguments are the exact arguments; nil when Redacted.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentNames are the names of the top-level arguments (always
	// given; the names are the tool's, not the data's).
	ArgumentNames []string `json:"argument_names"`
	// Resource is the action's resource; "" when Redacted.
	Resource string `json:"resource,omitempty"`
	// Redacted says values were left out; RedactedBecause says why, and
	// BindingHint is the action's presentation.binding_hint (what the
	// redacted values are bound to), when it names one.
	Redacted        bool           `json:"redacted"`
	RedactedBecause string         `json:"redacted_because,omitempty"`
	BindingHint     string         `json:"binding_hint,omitempty"`
	Risk            aais.RiskLevel `json:"risk"`
	RiskReasons     []string       `json:"risk_reasons"`
	Profile         string         `json:"profile,omitempty"`
	// Agent is who asked: the origin's agent id, else its session.
	Agent     string    `json:"agent,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is zero when the request does not expire.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// InboxURL opens the request in the web inbox.
	InboxURL string `json:"inbox_url,omitempty"`
	// Approvable says the request offers approve once, the one approval a
	// channel's button makes.
	Approvable bool `json:"approvable"`
}

// Resolved is what a channel reports when a request it announced is
// resolved.
type Resolved struct {
	// ID identifies the report ("ntf_" + request id + ".resolved").
	ID         string       `json:"id"`
	RequestID  string       `json:"request_id"`
	Sequence   uint64       `json:"sequence"`
	Outcome    aais.Outcome `json:"outcome"`
	Scope      aais.Scope   `json:"effective_scope,omitempty"`
	Message    string       `json:"message"`
	ResolvedAt time.Time    `json:"resolved_at"`
	// Actor decided (nil for an expiry, a cancellation by the runtime, a
	// rule); its AuthenticatedBy says where (api_token, session, slack,
	// webhook). Justification is their words.
	Actor         *aais.Actor `json:"actor,omitempty"`
	Justification string      `json:"justification,omitempty"`
	RuleID        string      `json:"rule_id,omitempty"`
}

// Redaction says which requests a notification may not show the values
// of. A request is redacted when its action says so
// (presentation.redacted), when its profile is in Profiles, or when
// PII says its profile involves personal data.
type Redaction struct {
	// Profiles are compliance profiles whose requests are always
	// redacted.
	Profiles []string
	// PII reports whether a profile involves personal data
	// (compliance pii_involved); known is false for a profile it does not
	// know, which is redacted too. Nil: only Profiles and the action
	// decide.
	PII func(profile string) (pii, known bool)
}

// because returns why req's values must not be shown, "" when they may.
func (r Redaction) because(req *aais.Request, profile string) string {
	switch {
	case req.Action.Redacted():
		return "the action marks its values as redacted"
	case profile != "" && slices.Contains(r.Profiles, profile):
		return "profile " + profile + " is configured as redacted"
	case profile != "" && r.PII != nil:
		pii, known := r.PII(profile)
		if !known {
			return "profile " + profile + " is unknown here"
		}
		if pii {
			return "profile " + profile + " involves personal data"
		}
	}
	return ""
}

// profileOf is the compliance profile a gateway's request names
// (gateway.ExchangeExtension), "" when none.
func profileOf(req *aais.Request) string {
	ref, _ := gateway.ExchangeRefOf(req)
	return ref.Profile
}

// NewNotice builds the notice of req, recorded at sequence seq. inbox is
// the web inbox's base URL ("" for no link).
func NewNotice(req *aais.Request, seq uint64, inbox string, red Redaction) Notice {
	a := req.Action
	n := Notice{
		ID: "ntf_" + req.ID + ".requested", RequestID: req.ID, Sequence: seq,
		ActionKind: a.Kind(), ActionName: a.Name(), ActionDigest: req.ActionDigest,
		Risk: req.Risk.Level, RiskReasons: slices.Clone(req.Risk.Reasons), Profile: profileOf(req),
		Agent: req.Origin.AgentID, CreatedAt: req.CreatedAt.Time(), ArgumentNames: argumentNames(a.Arguments()),
	}
	if n.Agent == "" {
		n.Agent = req.Origin.SessionID
	}
	if !req.ExpiresAt.IsZero() {
		n.ExpiresAt = req.ExpiresAt.Time()
	}
	if inbox != "" {
		n.InboxURL = strings.TrimRight(inbox, "/") + "/#/request/" + url.PathEscape(req.ID)
	}
	_, n.Approvable = req.Choice(aais.Approve, aais.ScopeOnce)
	if p := a.Presentation(); p != nil {
		n.BindingHint = p.BindingHint
	}
	if why := red.because(req, n.Profile); why != "" {
		n.Redacted, n.RedactedBecause = true, why
		return n
	}
	n.Summary, n.Resource = a.Summary(), a.Resource()
	if args := a.Arguments(); len(args) > 0 {
		n.Arguments = args
	}
	return n
}

// argumentNames lists the members of a JSON object, sorted.
func argumentNames(args json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NewResolved builds the report of a receipt recorded at sequence seq.
func NewResolved(res *aais.Resolution, seq uint64) Resolved {
	r := Resolved{ID: "ntf_" + res.RequestID + ".resolved", RequestID: res.RequestID, Sequence: seq,
		Outcome: res.Outcome, Scope: res.EffectiveScope, Message: res.Message, ResolvedAt: res.ResolvedAt.Time()}
	if actor, words, ok := aais.DecidedBy(res); ok {
		r.Actor, r.Justification = &actor, words
	} else if raw, ok := res.Extensions[aais.RuleExtension]; ok {
		var ref struct {
			RuleID string `json:"rule_id"`
		}
		if json.Unmarshal(raw, &ref) == nil {
			r.RuleID = ref.RuleID
		}
	}
	return r
}

// Route says which requests a channel announces. Every non-empty list
// must match; an empty Route matches every request.
type Route struct {
	// Profiles are compliance profiles ("" is not one: a request without
	// a profile matches only a Route without Profiles).
	Profiles []string
	// Capabilities are path.Match patterns over the action name
	// ("billing.*").
	Capabilities []string
	// MinRisk is the lowest risk level announced ("" for all).
	MinRisk aais.RiskLevel
}

// riskRank orders the AAIS risk levels.
var riskRank = map[aais.RiskLevel]int{aais.RiskLow: 1, aais.RiskMedium: 2, aais.RiskHigh: 3, aais.RiskCritical: 4}

// Check reports a pattern or a risk level that can never match.
func (r Route) Check() error {
	for _, p := range r.Capabilities {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return fmt.Errorf("capability pattern %q is malformed", p)
		}
	}
	if r.MinRisk != "" && riskRank[r.MinRisk] == 0 {
		return fmt.Errorf("min_risk %q: want low, medium, high or critical", r.MinRisk)
	}
	return nil
}

// Matches reports whether the route covers n.
func (r Route) Matches(n Notice) bool {
	if len(r.Profiles) > 0 && !slices.Contains(r.Profiles, n.Profile) {
		return false
	}
	if len(r.Capabilities) > 0 && !slices.ContainsFunc(r.Capabilities, func(p string) bool {
		ok, err := path.Match(p, n.ActionName)
		return err == nil && ok
	}) {
		return false
	}
	// An unknown level ranks 0: below every threshold but none.
	return r.MinRisk == "" || riskRank[n.Risk] >= riskRank[r.MinRisk]
}

// prettyArguments indents the arguments for a human, at most max bytes
// (cut with a note past it).
func prettyArguments(args json.RawMessage, max int) string {
	var b bytes.Buffer
	if json.Indent(&b, args, "", "  ") != nil {
		return ""
	}
	s := b.String()
	if len(s) > max {
		s = truncate(s, max) + "\n… (cut; the inbox shows all of it)"
	}
	return s
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
