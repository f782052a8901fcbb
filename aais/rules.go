package aais

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

// The constraint keys of saved approval rules.
//
// A reviewer who approves a choice with scope session or persistent
// approves more than the one request: the choice's scope_constraints say
// which future actions the approval also covers. NewRule turns such an
// approval into a Rule; Rule.Matches says whether a later request is
// covered; RuleSet picks the rule an authority records when it approves a
// request automatically. Everything here is pure: storing rules, listing
// them for people and revoking them durably is the caller's job.
//
// The constraint language: scope_constraints is a JSON object. Each member
// is one constraint; a rule covers a request only when every constraint
// holds. Keys and values are
// read strictly: a known key with a malformed value makes NewRule fail
// (ErrConstraint); an unknown key is kept but makes the rule never match
// (fail closed, AAIS §5 and security control 6), so a constraint written by
// a newer authority never widens what an older one approves.
//
//	action_kind               string  action.kind equals it exactly.
//	action_name               string  action.name equals it exactly.
//	action_digest             string  "sha256:" + 64 hex: the action's
//	                                  digest, recomputed from the action,
//	                                  equals it (pins one exact action).
//	resource_prefix           string  action.resource is present, starts
//	                                  with it, and has no ".." segment.
//	working_directory_prefix  string  action.working_directory is present,
//	                                  starts with it, and has no ".."
//	                                  segment.
//	argument_equals           object  JSON Pointer -> JSON value: the value
//	                                  at that pointer in action.arguments
//	                                  exists and has the same RFC 8785
//	                                  canonical form (so 1.0 equals 1 and
//	                                  member order does not matter).
//	argument_prefix           object  JSON Pointer -> string: the value at
//	                                  the pointer is a string starting with
//	                                  it.
//	argument_glob             object  JSON Pointer -> pattern: the value at
//	                                  the pointer is a string matching the
//	                                  pattern with path.Match semantics
//	                                  ('*' and '?' do not match '/', '[...]'
//	                                  classes, '\' escapes).
//	argument_range            object  JSON Pointer -> numeric range: the
//	                                  value at the pointer is a JSON number
//	                                  within the range, compared exactly as
//	                                  a decimal ("value <= 100",
//	                                  "100 <= value < 500"; the grammar and
//	                                  its limits are in numrange.go and
//	                                  docs/aais.md).
//	command_prefix            string  shorthand used by the upstream
//	                                  fixture: argument_prefix on "/command",
//	                                  and the rest of the command after the
//	                                  prefix contains no shell metacharacter
//	                                  or control character
//	                                  (; & | < > ` $ \ ( ) { } newline, ...),
//	                                  so "node --check a.js; rm -rf /" is not
//	                                  covered by "node --check ".
//	origin_harness            string  origin.harness equals it.
//	origin_session            string  origin.session_id equals it.
//	origin_project            string  origin.project equals it.
//	expires_at                string  RFC 3339 with an explicit offset (as
//	                                  every AAIS timestamp): the rule stops
//	                                  matching at that instant (now >=
//	                                  expires_at never matches).
//
// JSON Pointers are RFC 6901 and relative to action.arguments ("" is the
// whole arguments object, "/command" its command member, "/argv/0" the
// first element of its argv array). A pointer that does not resolve (a
// missing member, an index out of range, "-") makes the constraint fail.
// Pointer maps must not be empty; prefixes, names and patterns must not be
// empty strings.
//
// Every key narrows; no key widens. A rule must name the action it covers:
// NewRule refuses constraints without any of action_kind, action_name or
// action_digest (an approval for "any action" is unbounded, which AAIS
// forbids).
//
// Besides its constraints, a rule never matches once revoked or expired,
// nor, for scope session, outside the session it was approved in: a
// session rule is implicitly bound to the origin.harness and
// origin.session_id of the request that created it.
//
// Matching is textual over the exact action JSON. It cannot see what a
// path, a host name or an account resolves to when the action runs: the
// authority must still revalidate mutable bindings at use (AAIS §10,
// resource rebinding). A prefix covers whatever follows it, so prefer
// argument_equals or argument_glob where the shape of the arguments
// allows.
//
// Reasons returned for a non-match name the failing constraint and pointer
// but never quote the action's values, which may be sensitive.
const (
	ConstraintActionKind             = "action_kind"
	ConstraintActionName             = "action_name"
	ConstraintActionDigest           = "action_digest"
	ConstraintResourcePrefix         = "resource_prefix"
	ConstraintWorkingDirectoryPrefix = "working_directory_prefix"
	ConstraintArgumentEquals         = "argument_equals"
	ConstraintArgumentPrefix         = "argument_prefix"
	ConstraintArgumentGlob           = "argument_glob"
	ConstraintArgumentRange          = "argument_range"
	ConstraintCommandPrefix          = "command_prefix"
	ConstraintOriginHarness          = "origin_harness"
	ConstraintOriginSession          = "origin_session"
	ConstraintOriginProject          = "origin_project"
	ConstraintExpiresAt              = "expires_at"
)

// Errors of the rule functions.
var (
	// ErrRule: NewRule refused to make a rule (the approval is not an
	// approved session or persistent choice, the pieces do not belong
	// together, the constraints are malformed or too broad).
	ErrRule = errors.New("aais: cannot make an approval rule")
	// ErrConstraint: a known scope constraint has a malformed value.
	ErrConstraint = errors.New("aais: malformed scope constraint")
	// ErrUnknownRule: no rule with that id.
	ErrUnknownRule = errors.New("aais: unknown approval rule")
)

// ConstraintSet is a parsed scope_constraints object (see the constraint
// language above). Empty fields and nil maps are constraints that are not
// set.
type ConstraintSet struct {
	ActionKind             string
	ActionName             string
	ActionDigest           string
	ResourcePrefix         string
	WorkingDirectoryPrefix string
	// ArgumentEquals maps a JSON Pointer to the RFC 8785 canonical form of
	// the expected value.
	ArgumentEquals map[string]json.RawMessage
	ArgumentPrefix map[string]string
	ArgumentGlob   map[string]string
	// ArgumentRange maps a JSON Pointer to the numeric range the number
	// there must lie in.
	ArgumentRange map[string]NumericRange
	// CommandPrefix is command_prefix: a prefix of the string at
	// "/command", with no shell metacharacter after it.
	CommandPrefix string
	OriginHarness string
	OriginSession string
	OriginProject string
	// ExpiresAt is the zero Timestamp when expires_at is not set.
	ExpiresAt Timestamp
	// Unknown lists the keys not understood, sorted. A set with unknown
	// keys never matches.
	Unknown []string
}

// ParseConstraints reads scope_constraints strictly. A known key with a
// malformed value is an error wrapping ErrConstraint; unknown keys are
// recorded in Unknown, not refused. Nil or empty constraints are refused:
// AAIS requires a non-empty object for session and persistent choices.
func ParseConstraints(c Constraints) (ConstraintSet, error) {
	var cs ConstraintSet
	if len(c) == 0 {
		return cs, fmt.Errorf("%w: no scope_constraints", ErrConstraint)
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := cs.set(k, c[k]); err != nil {
			return ConstraintSet{}, fmt.Errorf("%w: %s: %s", ErrConstraint, k, err)
		}
	}
	return cs, nil
}

func (cs *ConstraintSet) set(key string, raw json.RawMessage) error {
	str := func(dst *string) error {
		s, err := constraintString(raw)
		if err != nil {
			return err
		}
		*dst = s
		return nil
	}
	switch key {
	case ConstraintActionKind:
		return str(&cs.ActionKind)
	case ConstraintActionName:
		return str(&cs.ActionName)
	case ConstraintResourcePrefix:
		return str(&cs.ResourcePrefix)
	case ConstraintWorkingDirectoryPrefix:
		return str(&cs.WorkingDirectoryPrefix)
	case ConstraintCommandPrefix:
		return str(&cs.CommandPrefix)
	case ConstraintOriginHarness:
		return str(&cs.OriginHarness)
	case ConstraintOriginSession:
		return str(&cs.OriginSession)
	case ConstraintOriginProject:
		return str(&cs.OriginProject)
	case ConstraintActionDigest:
		if err := str(&cs.ActionDigest); err != nil {
			return err
		}
		if !jcs.IsDigest(cs.ActionDigest) {
			return errors.New(`want "sha256:" and 64 lowercase hex digits`)
		}
		return nil
	case ConstraintExpiresAt:
		var s string
		if err := str(&s); err != nil {
			return err
		}
		ts, err := ParseTimestamp(s)
		if err != nil {
			return err
		}
		cs.ExpiresAt = ts
		return nil
	case ConstraintArgumentEquals:
		m, err := pointerMap(raw)
		if err != nil {
			return err
		}
		cs.ArgumentEquals = make(map[string]json.RawMessage, len(m))
		for p, v := range m {
			c, err := jcs.CanonicalizeValue(v)
			if err != nil {
				return fmt.Errorf("%s: %v", p, err)
			}
			cs.ArgumentEquals[p] = c
		}
		return nil
	case ConstraintArgumentRange:
		m, err := pointerMap(raw)
		if err != nil {
			return err
		}
		cs.ArgumentRange = make(map[string]NumericRange, len(m))
		for _, p := range sortedKeys(m) {
			s, ok := m[p].(string)
			if !ok || s == "" {
				return fmt.Errorf("%q: want a range as a string, such as \"value <= 100\"", p)
			}
			r, err := ParseNumericRange(s)
			if err != nil {
				return fmt.Errorf("%q: %s: %v", p, strconv.Quote(s), err)
			}
			cs.ArgumentRange[p] = r
		}
		return nil
	case ConstraintArgumentPrefix, ConstraintArgumentGlob:
		m, err := pointerMap(raw)
		if err != nil {
			return err
		}
		out := make(map[string]string, len(m))
		for p, v := range m {
			s, ok := v.(string)
			if !ok || s == "" {
				return fmt.Errorf("%s: want a non-empty string", p)
			}
			if key == ConstraintArgumentGlob {
				if _, err := path.Match(s, ""); err != nil {
					return fmt.Errorf("%s: bad pattern: %v", p, err)
				}
			}
			out[p] = s
		}
		if key == ConstraintArgumentGlob {
			cs.ArgumentGlob = out
		} else {
			cs.ArgumentPrefix = out
		}
		return nil
	}
	cs.Unknown = append(cs.Unknown, key) // keys arrive sorted
	return nil
}

// constraintString decodes a non-empty JSON string strictly.
func constraintString(raw json.RawMessage) (string, error) {
	v, err := jcs.Decode(raw)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return "", errors.New("want a non-empty string")
	}
	return s, nil
}

// pointerMap decodes a non-empty object whose member names are JSON
// Pointers.
func pointerMap(raw json.RawMessage) (map[string]any, error) {
	v, err := jcs.Decode(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, errors.New("want a non-empty object of JSON Pointer members")
	}
	for p := range m {
		if !validPointer(p) {
			return nil, fmt.Errorf("%q is not a JSON Pointer", p)
		}
	}
	return m, nil
}

// validPointer checks RFC 6901 syntax: "" or "/"-separated tokens in which
// '~' is always followed by '0' or '1'.
func validPointer(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}

// resolvePointer returns the value p names in doc (a jcs.Decode value).
func resolvePointer(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	cur := doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if tok == "" || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || strconv.Itoa(i) != tok {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// narrowsAction reports whether the set says which action it covers.
func (cs *ConstraintSet) narrowsAction() bool {
	return cs.ActionKind != "" || cs.ActionName != "" || cs.ActionDigest != ""
}

// clone returns a deep copy.
func (cs ConstraintSet) clone() ConstraintSet {
	out := cs
	if cs.ArgumentEquals != nil {
		out.ArgumentEquals = make(map[string]json.RawMessage, len(cs.ArgumentEquals))
		for k, v := range cs.ArgumentEquals {
			out.ArgumentEquals[k] = slices.Clone(v)
		}
	}
	if cs.ArgumentPrefix != nil {
		out.ArgumentPrefix = make(map[string]string, len(cs.ArgumentPrefix))
		for k, v := range cs.ArgumentPrefix {
			out.ArgumentPrefix[k] = v
		}
	}
	if cs.ArgumentGlob != nil {
		out.ArgumentGlob = make(map[string]string, len(cs.ArgumentGlob))
		for k, v := range cs.ArgumentGlob {
			out.ArgumentGlob[k] = v
		}
	}
	if cs.ArgumentRange != nil {
		out.ArgumentRange = make(map[string]NumericRange, len(cs.ArgumentRange))
		for k, v := range cs.ArgumentRange {
			out.ArgumentRange[k] = v // the bounds are never modified
		}
	}
	out.Unknown = slices.Clone(cs.Unknown)
	return out
}

// Matches reports whether the constraints hold for req at now; when they
// do not it says why. Expiry is checked here too (now >= expires_at does
// not match), unknown keys never match. Session binding and revocation
// belong to the Rule (see Rule.Matches).
func (cs *ConstraintSet) Matches(req *Request, now time.Time) (bool, string) {
	ok, why, _ := cs.Explain(req, now)
	return ok, why
}

// Explain is Matches that also says, when the constraints hold, why:
// one line per constraint that held, in a fixed order ("action_name is
// \"billing.refund\"", "argument_range \"/amount\": value <= 100"). The
// lines quote the constraints, which the authority wrote, never the
// request's values.
func (cs *ConstraintSet) Explain(req *Request, now time.Time) (ok bool, why string, because []string) {
	if req == nil {
		return false, "no request", nil
	}
	if now.IsZero() {
		return false, "no time given", nil
	}
	if !cs.ExpiresAt.IsZero() && !now.Before(cs.ExpiresAt.Time()) {
		return false, "expires_at: the rule has expired", nil
	}
	if len(cs.Unknown) > 0 {
		return false, "unknown constraint " + strings.Join(cs.Unknown, ", ") + ": never matches (fail closed)", nil
	}
	held := func(format string, a ...any) { because = append(because, fmt.Sprintf(format, a...)) }
	if !cs.ExpiresAt.IsZero() {
		held("expires_at %s is still ahead", cs.ExpiresAt.Time().UTC().Format(time.RFC3339))
	}
	o := req.Origin
	if cs.OriginHarness != "" {
		if o.Harness != cs.OriginHarness {
			return false, "origin_harness: different harness", nil
		}
		held("origin_harness is %q", cs.OriginHarness)
	}
	if cs.OriginSession != "" {
		if o.SessionID != cs.OriginSession {
			return false, "origin_session: different session", nil
		}
		held("origin_session is %q", cs.OriginSession)
	}
	if cs.OriginProject != "" {
		if o.Project != cs.OriginProject {
			return false, "origin_project: different project", nil
		}
		held("origin_project is %q", cs.OriginProject)
	}
	a := req.Action
	if a.IsZero() {
		return false, "the request has no action", nil
	}
	if cs.ActionDigest != "" {
		d, err := a.Digest()
		if err != nil || d != cs.ActionDigest {
			return false, "action_digest: a different action", nil
		}
		held("action_digest is %s (this exact action)", cs.ActionDigest)
	}
	if cs.ActionKind != "" {
		if a.Kind() != cs.ActionKind {
			return false, "action_kind: different kind", nil
		}
		held("action_kind is %q", cs.ActionKind)
	}
	if cs.ActionName != "" {
		if a.Name() != cs.ActionName {
			return false, "action_name: different name", nil
		}
		held("action_name is %q", cs.ActionName)
	}
	if cs.ResourcePrefix != "" {
		if ok, why := pathPrefix(a.Resource(), cs.ResourcePrefix); !ok {
			return false, "resource_prefix: " + why, nil
		}
		held("resource is under resource_prefix %q", cs.ResourcePrefix)
	}
	if cs.WorkingDirectoryPrefix != "" {
		if ok, why := pathPrefix(a.WorkingDirectory(), cs.WorkingDirectoryPrefix); !ok {
			return false, "working_directory_prefix: " + why, nil
		}
		held("working_directory is under working_directory_prefix %q", cs.WorkingDirectoryPrefix)
	}
	if cs.ArgumentEquals == nil && cs.ArgumentPrefix == nil && cs.ArgumentGlob == nil && cs.ArgumentRange == nil && cs.CommandPrefix == "" {
		return true, "", because
	}
	args, err := jcs.Decode(a.view.Arguments)
	if err != nil {
		return false, "the action's arguments cannot be read", nil
	}
	for _, p := range sortedKeys(cs.ArgumentEquals) {
		v, ok := resolvePointer(args, p)
		if !ok {
			return false, fmt.Sprintf("argument_equals %q: no such argument", p), nil
		}
		c, err := jcs.CanonicalizeValue(v)
		if err != nil || string(c) != string(cs.ArgumentEquals[p]) {
			return false, fmt.Sprintf("argument_equals %q: different value", p), nil
		}
		held("argument %q equals %s", p, cs.ArgumentEquals[p])
	}
	for _, p := range sortedKeys(cs.ArgumentPrefix) {
		s, why := argumentString(args, p)
		if why != "" {
			return false, fmt.Sprintf("argument_prefix %q: %s", p, why), nil
		}
		if !strings.HasPrefix(s, cs.ArgumentPrefix[p]) {
			return false, fmt.Sprintf("argument_prefix %q: does not start with the prefix", p), nil
		}
		held("argument %q starts with %q", p, cs.ArgumentPrefix[p])
	}
	if cs.CommandPrefix != "" {
		s, why := argumentString(args, "/command")
		if why != "" {
			return false, "command_prefix: " + why, nil
		}
		rest, ok := strings.CutPrefix(s, cs.CommandPrefix)
		if !ok {
			return false, "command_prefix: the command does not start with the prefix", nil
		}
		if i := strings.IndexFunc(rest, isShellMeta); i >= 0 {
			return false, "command_prefix: a shell metacharacter follows the prefix", nil
		}
		held("the command starts with %q and no shell metacharacter follows", cs.CommandPrefix)
	}
	for _, p := range sortedKeys(cs.ArgumentGlob) {
		s, why := argumentString(args, p)
		if why != "" {
			return false, fmt.Sprintf("argument_glob %q: %s", p, why), nil
		}
		if ok, err := path.Match(cs.ArgumentGlob[p], s); err != nil || !ok {
			return false, fmt.Sprintf("argument_glob %q: does not match the pattern", p), nil
		}
		held("argument %q matches the pattern %q", p, cs.ArgumentGlob[p])
	}
	for _, p := range sortedKeys(cs.ArgumentRange) {
		x, why := argumentNumber(args, p)
		if why != "" {
			return false, fmt.Sprintf("argument_range %q: %s", p, why), nil
		}
		r := cs.ArgumentRange[p]
		if !r.Contains(x) {
			return false, fmt.Sprintf("argument_range %q: outside %s", p, r), nil
		}
		held("argument %q: %s holds", p, r)
	}
	return true, "", because
}

// argumentNumber reads the number at p exactly, or says why it cannot:
// a value that is not a JSON number, or one outside the limits of
// parseDecimal, does not compare.
func argumentNumber(args any, p string) (*big.Rat, string) {
	v, ok := resolvePointer(args, p)
	if !ok {
		return nil, "no such argument"
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, "not a number"
	}
	x, err := parseDecimal(string(n))
	if err != nil {
		return nil, "the number cannot be compared: " + err.Error()
	}
	return x, ""
}

func argumentString(args any, p string) (string, string) {
	v, ok := resolvePointer(args, p)
	if !ok {
		return "", "no such argument"
	}
	s, ok := v.(string)
	if !ok {
		return "", "not a string"
	}
	return s, ""
}

// pathPrefix checks a resource or working directory against a prefix. The
// value must contain no ".." segment, plain or percent-encoded, split on
// '/' or '\', so that "/ws/../etc" is not under "/ws/".
func pathPrefix(v, prefix string) (bool, string) {
	if v == "" {
		return false, "the action has none"
	}
	if !strings.HasPrefix(v, prefix) {
		return false, "not under the prefix"
	}
	for _, seg := range strings.FieldsFunc(v, func(r rune) bool { return r == '/' || r == '\\' }) {
		switch strings.ToLower(seg) {
		case "..", "%2e%2e", ".%2e", "%2e.":
			return false, `contains a ".." segment`
		}
	}
	if strings.ContainsRune(v, 0) {
		return false, "contains a NUL character"
	}
	return true, ""
}

// isShellMeta reports characters that let a shell command do more than
// its prefix says: command separators, redirection, substitution,
// grouping, escapes, and every control character.
func isShellMeta(r rune) bool {
	if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
		return true
	}
	return strings.ContainsRune(";&|<>`$\\(){}!", r)
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Rule is a saved approval: an approved session or persistent choice and
// the constraints that say which future requests it covers. Make one with
// NewRule or decode one with json.Unmarshal; a Rule built any other way
// never matches. The constraints themselves are not exported so they
// cannot drift from their parsed form; read them with Constraints and
// Parsed.
type Rule struct {
	// ID identifies the rule (an AAIS id; "rul_" + 32 hex digits when
	// generated).
	ID string
	// Scope is ScopeSession or ScopePersistent.
	Scope Scope
	// RequestID, DecisionID, ResolutionID and ActionDigest name the
	// approval the rule came from.
	RequestID    string
	DecisionID   string
	ResolutionID string
	ActionDigest string
	// Actor approved it (the decision's actor, which the authority set
	// from the authenticated channel).
	Actor Actor
	// Origin is the origin of the approved request. A session rule only
	// matches requests with the same Origin.Harness and Origin.SessionID.
	Origin Origin
	// CreatedAt is the authority's clock when the rule was made; it orders
	// rules (RuleSet).
	CreatedAt time.Time
	// ExpiresAt is when the rule stops matching (zero: never): the earlier
	// of the expires_at constraint and RuleParams.ExpiresAt. The
	// expires_at constraint is enforced on its own too, so moving this
	// later does not extend the rule.
	ExpiresAt time.Time
	// RevokedAt is when the rule was revoked (zero: it is not); RevokedBy
	// who revoked it, when known.
	RevokedAt time.Time
	RevokedBy Actor

	constraints Constraints
	set         *ConstraintSet // nil: not built by NewRule or UnmarshalJSON
}

// RuleParams names the approval to make a rule from.
type RuleParams struct {
	// ID is the rule id; "" generates "rul_" + 32 hex digits from
	// Options.Rand.
	ID string
	// Request is the approved request.
	Request *Request
	// Decision is the decision that approved it, with the actor the
	// authority established from the authenticated channel.
	Decision *Decision
	// Resolution is the receipt that recorded the approval.
	Resolution *Resolution
	// Now is the authority's clock (required).
	Now time.Time
	// ExpiresAt optionally caps the rule's life (authority policy, e.g. a
	// maximum age for persistent rules); zero means no cap beyond the
	// expires_at constraint.
	ExpiresAt time.Time
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

func validID(s string) bool { return len(s) <= 200 && idRE.MatchString(s) }

// NewRule makes the rule an approved session or persistent choice creates.
// It refuses (ErrRule) anything else: a missing piece, a receipt whose
// outcome is not approved or whose effective scope is once, a decision,
// receipt and request that do not belong together (ids, digests, verdict,
// scope), a choice the request did not offer or that has no
// scope_constraints, malformed constraints (also ErrConstraint),
// constraints that do not name the action (none of action_kind,
// action_name, action_digest), a session rule whose request has no
// session, and a rule already expired at Now.
func NewRule(p RuleParams) (*Rule, error) {
	return (*Options)(nil).NewRule(p)
}

// NewRule is the package-level NewRule with o's randomness.
func (o *Options) NewRule(p RuleParams) (*Rule, error) {
	req, dec, res := p.Request, p.Decision, p.Resolution
	switch {
	case req == nil || dec == nil || res == nil:
		return nil, fmt.Errorf("%w: a rule needs the request, the decision and the receipt", ErrRule)
	case p.Now.IsZero():
		return nil, fmt.Errorf("%w: no time given", ErrRule)
	case res.Outcome != OutcomeApproved:
		return nil, fmt.Errorf("%w: the receipt's outcome is %s, not approved", ErrRule, res.Outcome)
	case !res.EffectiveScope.Bounded():
		return nil, fmt.Errorf("%w: effective scope %q saves no rule", ErrRule, res.EffectiveScope)
	case dec.Decision != Approve || dec.Scope != res.EffectiveScope:
		return nil, fmt.Errorf("%w: the decision (%s, %s) is not the approval the receipt records", ErrRule, dec.Decision, dec.Scope)
	case res.RequestID != req.ID || dec.RequestID != req.ID:
		return nil, fmt.Errorf("%w: the decision and the receipt are not for request %s", ErrRule, req.ID)
	case res.DecisionID != dec.ID:
		return nil, fmt.Errorf("%w: the receipt was not caused by decision %s", ErrRule, dec.ID)
	case req.ActionDigest == "" || res.ActionDigest != req.ActionDigest || dec.ActionDigest != req.ActionDigest:
		return nil, fmt.Errorf("%w: the action digests differ", ErrRule)
	case !validID(res.ID):
		return nil, fmt.Errorf("%w: the receipt has no valid id", ErrRule)
	}
	choice, ok := req.Choice(Approve, dec.Scope)
	if !ok {
		return nil, fmt.Errorf("%w: (approve, %s) was not offered", ErrRule, dec.Scope)
	}
	if len(choice.ScopeConstraints) == 0 {
		return nil, fmt.Errorf("%w: the %s choice has no scope_constraints", ErrRule, dec.Scope)
	}
	if dec.Scope == ScopeSession && (req.Origin.SessionID == "" || req.Origin.Harness == "") {
		return nil, fmt.Errorf("%w: a session rule needs the request's harness and session", ErrRule)
	}
	id, err := o.idOr(p.ID, "rul")
	if err != nil {
		return nil, err
	}
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q is not a valid id", ErrRule, id)
	}
	r := &Rule{
		ID:           id,
		Scope:        dec.Scope,
		RequestID:    req.ID,
		DecisionID:   dec.ID,
		ResolutionID: res.ID,
		ActionDigest: req.ActionDigest,
		Actor:        dec.Actor,
		Origin:       req.Origin,
		CreatedAt:    p.Now.UTC(),
		constraints:  cloneConstraints(choice.ScopeConstraints),
	}
	if !p.ExpiresAt.IsZero() {
		r.ExpiresAt = p.ExpiresAt.UTC()
	}
	if err := r.parse(); err != nil {
		return nil, err
	}
	if !r.ExpiresAt.IsZero() && !p.Now.Before(r.ExpiresAt) {
		return nil, fmt.Errorf("%w: the rule would already be expired", ErrRule)
	}
	return r, nil
}

// parse fills r.set from r.constraints and folds the expires_at
// constraint into ExpiresAt.
func (r *Rule) parse() error {
	cs, err := ParseConstraints(r.constraints)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRule, err)
	}
	if !cs.narrowsAction() {
		return fmt.Errorf("%w: the constraints must name the action (action_kind, action_name or action_digest)", ErrRule)
	}
	if t := cs.ExpiresAt.Time(); !cs.ExpiresAt.IsZero() && (r.ExpiresAt.IsZero() || t.Before(r.ExpiresAt)) {
		r.ExpiresAt = t
	}
	r.set = &cs
	return nil
}

func cloneConstraints(c Constraints) Constraints {
	if c == nil {
		return nil
	}
	out := make(Constraints, len(c))
	for k, v := range c {
		out[k] = slices.Clone(v)
	}
	return out
}

// Constraints returns a copy of the scope_constraints the rule was made
// from, as offered (for display and storage).
func (r *Rule) Constraints() Constraints { return cloneConstraints(r.constraints) }

// Parsed returns a copy of the parsed constraints; ok is false for a Rule
// not built by NewRule or UnmarshalJSON.
func (r *Rule) Parsed() (cs ConstraintSet, ok bool) {
	if r == nil || r.set == nil {
		return ConstraintSet{}, false
	}
	return r.set.clone(), true
}

// Revoked reports whether the rule was revoked.
func (r *Rule) Revoked() bool { return !r.RevokedAt.IsZero() }

// Expired reports whether the rule has expired at now (now >= ExpiresAt).
func (r *Rule) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// Active reports whether the rule can still match at now: built properly,
// not revoked, not expired, and without unknown constraints.
func (r *Rule) Active(now time.Time) bool {
	return r != nil && r.set != nil && !r.Revoked() && !r.Expired(now) && len(r.set.Unknown) == 0
}

// Clone returns a deep copy of r.
func (r *Rule) Clone() *Rule {
	if r == nil {
		return nil
	}
	c := *r
	c.constraints = cloneConstraints(r.constraints)
	if r.set != nil {
		s := r.set.clone()
		c.set = &s
	}
	return &c
}

// Revoke returns a copy of r revoked at at by by (by may be the zero
// Actor). Revoking a revoked rule changes nothing: the first revocation
// stands. A zero at is refused (ErrInvalid).
func (r *Rule) Revoke(at time.Time, by Actor) (*Rule, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil rule", ErrUnknownRule)
	}
	if at.IsZero() {
		return nil, fmt.Errorf("%w: revocation without a time", ErrInvalid)
	}
	c := r.Clone()
	if !c.Revoked() {
		c.RevokedAt, c.RevokedBy = at.UTC(), by
	}
	return c, nil
}

// Matches reports whether the rule covers req at now (the authority's
// clock), and when it does not, why. In this order, the rule does not
// match when: it was not built by NewRule or UnmarshalJSON; req is nil or
// now is zero; it is revoked; now >= ExpiresAt; a constraint key is
// unknown; it is a session rule and req comes from another harness or
// session; a constraint fails (see the constraint language). The reason
// names the failing check but never quotes the request's values.
//
// Matches does not validate req: pass requests the authority has built or
// parsed (NewRequest, Parse), and still compare the digest of the action
// about to run with the request's before running it.
func (r *Rule) Matches(req *Request, now time.Time) (bool, string) {
	ok, why, _ := r.Explain(req, now)
	return ok, why
}

// Explain is Matches that also says, when the rule covers req, why: which
// rule (its id, scope and approver), that it is neither revoked nor
// expired, the session binding, and every constraint that held (see
// ConstraintSet.Explain). The lines never quote the request's values.
func (r *Rule) Explain(req *Request, now time.Time) (ok bool, why string, because []string) {
	switch {
	case r == nil || r.set == nil:
		return false, "not a rule made by NewRule", nil
	case req == nil:
		return false, "no request", nil
	case now.IsZero():
		return false, "no time given", nil
	case r.Revoked():
		return false, "the rule was revoked", nil
	case r.Expired(now):
		return false, "the rule has expired", nil
	case !r.Scope.Bounded():
		return false, "the rule has no session or persistent scope", nil
	}
	if len(r.set.Unknown) > 0 {
		return false, "unknown constraint " + strings.Join(r.set.Unknown, ", ") + ": never matches (fail closed)", nil
	}
	because = []string{fmt.Sprintf("rule %s: a %s approval by %s of request %s", r.ID, r.Scope, r.Actor.ID, r.RequestID)}
	if r.ExpiresAt.IsZero() {
		because = append(because, "not revoked; no expiry")
	} else {
		because = append(because, "not revoked; expires at "+r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if r.Scope == ScopeSession {
		if r.Origin.SessionID == "" || req.Origin.SessionID != r.Origin.SessionID || req.Origin.Harness != r.Origin.Harness {
			return false, "session rule: the request is from another session", nil
		}
		because = append(because, fmt.Sprintf("same session %q of harness %q", r.Origin.SessionID, r.Origin.Harness))
	}
	ok, why, held := r.set.Explain(req, now)
	if !ok {
		return false, why, nil
	}
	return true, "", append(because, held...)
}

// ruleJSON is the storage form of a Rule.
type ruleJSON struct {
	ID           string      `json:"id"`
	Scope        Scope       `json:"scope"`
	Constraints  Constraints `json:"scope_constraints"`
	RequestID    string      `json:"request_id"`
	DecisionID   string      `json:"decision_id"`
	ResolutionID string      `json:"resolution_id"`
	ActionDigest string      `json:"action_digest"`
	Actor        Actor       `json:"actor"`
	Origin       Origin      `json:"origin"`
	CreatedAt    time.Time   `json:"created_at"`
	ExpiresAt    time.Time   `json:"expires_at,omitzero"`
	RevokedAt    time.Time   `json:"revoked_at,omitzero"`
	RevokedBy    *Actor      `json:"revoked_by,omitempty"`
}

// MarshalJSON writes the storage form of the rule: its fields in
// snake_case, the constraints as offered, times in RFC 3339. A Rule not
// built by NewRule or UnmarshalJSON is refused.
func (r Rule) MarshalJSON() ([]byte, error) {
	if r.set == nil {
		return nil, fmt.Errorf("%w: not a rule made by NewRule", ErrInvalid)
	}
	w := ruleJSON{
		ID: r.ID, Scope: r.Scope, Constraints: r.constraints,
		RequestID: r.RequestID, DecisionID: r.DecisionID, ResolutionID: r.ResolutionID,
		ActionDigest: r.ActionDigest, Actor: r.Actor, Origin: r.Origin,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt,
	}
	if r.RevokedBy != (Actor{}) {
		by := r.RevokedBy
		w.RevokedBy = &by
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the storage form MarshalJSON writes and checks it as
// NewRule would (valid id, session or persistent scope, constraints that
// parse and name the action, a session for a session rule). Unknown
// members are refused. A rule read back is not refused for having expired.
func (r *Rule) UnmarshalJSON(data []byte) error {
	if _, err := jcs.Decode(data); err != nil {
		return fmt.Errorf("%w: %w", ErrRule, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w ruleJSON
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("%w: %w", ErrRule, err)
	}
	switch {
	case !validID(w.ID):
		return fmt.Errorf("%w: %q is not a valid id", ErrRule, w.ID)
	case !w.Scope.Bounded():
		return fmt.Errorf("%w: scope %q", ErrRule, w.Scope)
	case w.CreatedAt.IsZero():
		return fmt.Errorf("%w: no created_at", ErrRule)
	case w.Scope == ScopeSession && (w.Origin.SessionID == "" || w.Origin.Harness == ""):
		return fmt.Errorf("%w: a session rule needs its harness and session", ErrRule)
	}
	n := Rule{
		ID: w.ID, Scope: w.Scope, RequestID: w.RequestID, DecisionID: w.DecisionID,
		ResolutionID: w.ResolutionID, ActionDigest: w.ActionDigest, Actor: w.Actor, Origin: w.Origin,
		CreatedAt: w.CreatedAt.UTC(), constraints: w.Constraints,
	}
	if !w.ExpiresAt.IsZero() {
		n.ExpiresAt = w.ExpiresAt.UTC()
	}
	if !w.RevokedAt.IsZero() {
		n.RevokedAt = w.RevokedAt.UTC()
	}
	if w.RevokedBy != nil {
		n.RevokedBy = *w.RevokedBy
	}
	if err := n.parse(); err != nil {
		return err
	}
	*r = n
	return nil
}

// RuleSet is a collection of rules, as a store lists them. Its methods are
// pure and never modify the set or its rules.
//
// Order: rules are considered oldest first, by CreatedAt, then by ID
// (byte-wise) for rules created at the same instant. Match returns the
// first rule in that order that matches, so which rule an automatic
// approval records does not depend on storage order; since every rule
// only approves, the choice never changes the outcome, only which rule
// the receipt names (and which revocation would have prevented it).
type RuleSet []*Rule

// Sorted returns the rules in matching order (a new slice sharing the
// rules). Nil entries are dropped.
func (s RuleSet) Sorted() RuleSet {
	out := make(RuleSet, 0, len(s))
	for _, r := range s {
		if r != nil {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b *Rule) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Match returns the first rule, in matching order, that covers req at now,
// or nil.
func (s RuleSet) Match(req *Request, now time.Time) *Rule {
	for _, r := range s.Sorted() {
		if ok, _ := r.Matches(req, now); ok {
			return r
		}
	}
	return nil
}

// RuleMatch is one line of RuleSet.Explain.
type RuleMatch struct {
	Rule    *Rule
	Matched bool
	// Reason says why the rule does not match ("" when it does).
	Reason string
	// Because says why it matches (Rule.Explain; nil when it does not).
	Because []string
}

// Explain evaluates every rule against req at now, in matching order, for
// inspection: the first entry with Matched true is the one Match returns.
func (s RuleSet) Explain(req *Request, now time.Time) []RuleMatch {
	sorted := s.Sorted()
	out := make([]RuleMatch, len(sorted))
	for i, r := range sorted {
		ok, why, because := r.Explain(req, now)
		out[i] = RuleMatch{Rule: r, Matched: ok, Reason: why, Because: because}
	}
	return out
}

// Get returns the rule with the given id (the first in matching order if
// ids repeat), or nil.
func (s RuleSet) Get(id string) *Rule {
	for _, r := range s.Sorted() {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// Active returns the rules that can still match at now (see Rule.Active),
// in matching order.
func (s RuleSet) Active(now time.Time) RuleSet {
	var out RuleSet
	for _, r := range s.Sorted() {
		if r.Active(now) {
			out = append(out, r)
		}
	}
	return out
}

// Revoke returns a copy of the set in which every rule with the given id
// is revoked (see Rule.Revoke); the original set and its rules are left
// unchanged. An id no rule has yields ErrUnknownRule.
func (s RuleSet) Revoke(id string, at time.Time, by Actor) (RuleSet, error) {
	out := make(RuleSet, len(s))
	found := false
	for i, r := range s {
		if r != nil && r.ID == id {
			c, err := r.Revoke(at, by)
			if err != nil {
				return nil, err
			}
			out[i], found = c, true
			continue
		}
		out[i] = r
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrUnknownRule, id)
	}
	return out, nil
}
