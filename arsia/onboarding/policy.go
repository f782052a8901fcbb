package onboarding

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/schema"
	"github.com/custos-runtime/custos/jcs"
)

// PolicySchema is the embedded JSON Schema of a capability policy.
const PolicySchema = "arsia-capability-policy.schema.json"

// MaxPolicyBytes caps a policy document given to ParsePolicy.
const MaxPolicyBytes = 1 << 20

// MaxTokenLifetimeSeconds is the longest token_lifetime_seconds Custos
// accepts: 366 days. The schema sets no maximum, but a longer-lived
// onboarding token is a configuration mistake, not a policy.
const MaxTokenLifetimeSeconds = 366 * 24 * 60 * 60

// The token lifetime range ARSIA-Identity §8.1 RECOMMENDS; Warnings flags
// a policy outside it.
const (
	RecommendedMinTokenLifetimeSeconds = 900
	RecommendedMaxTokenLifetimeSeconds = 86400
)

// MaxRiskLevel is the top of the ARSIA-Actions §2.2 risk scale (0 to 10).
const MaxRiskLevel = 10

// Status is what a policy rule says about a capability (ARSIA-Identity
// §8.2).
type Status string

// The three rule statuses.
const (
	// StatusAllowed grants the capability freely.
	StatusAllowed Status = "allowed"
	// StatusOversightRequired grants it, but every invocation goes
	// through a pending_approval flow first (ARSIA-Actions §3.2).
	StatusOversightRequired Status = "oversight_required"
	// StatusProhibited refuses it, and denies an onboarding request that
	// asks for it.
	StatusProhibited Status = "prohibited"
)

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool {
	return s == StatusAllowed || s == StatusOversightRequired || s == StatusProhibited
}

// restrictiveness orders the statuses, most permissive first; unknown
// statuses count as prohibited.
func (s Status) restrictiveness() int {
	switch s {
	case StatusAllowed:
		return 0
	case StatusOversightRequired:
		return 1
	}
	return 2
}

// CapabilityRule is one entry of a policy's capabilities (ARSIA-Identity
// §8.2).
type CapabilityRule struct {
	// Capability is an exact capability name; wildcards are not allowed
	// in policy rules.
	Capability string
	Status     Status
	// MaxRiskLevel, when not nil, is the highest action risk level (0 to
	// 10) at which the capability may be used; above it the capability
	// is treated as prohibited, whatever Status says.
	MaxRiskLevel *int
	// Conditions is an informational description for audit records; it
	// is not enforced.
	Conditions string
}

// CapabilityPolicy is the receiving organization's capability policy: the
// input of Phase 3 (capability scoping) of onboarding (ARSIA-Identity
// §8.1). Evaluation is deny-by-default: a capability no rule names is
// refused.
//
// Build one with ParsePolicy or PolicyFromMap, which validate it; a
// policy assembled in Go should be checked with Validate. Evaluate
// refuses every capability of an invalid policy.
type CapabilityPolicy struct {
	// PolicyVersion identifies the policy in the onboarding decision, so
	// that auditors know which version was applied.
	PolicyVersion string
	// TokenLifetimeSeconds is the longest lifetime of an access token
	// issued to an approved agent.
	TokenLifetimeSeconds int
	Capabilities         []CapabilityRule
}

// ParsePolicy decodes a capability policy document strictly (duplicate
// member names and non-interoperable numbers are refused; at most
// MaxPolicyBytes) and validates it as PolicyFromMap does. Errors wrap
// ErrInvalidPolicy.
func ParsePolicy(data []byte) (*CapabilityPolicy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, fmt.Errorf("%w: document is %d bytes, more than %d", ErrInvalidPolicy, len(data), MaxPolicyBytes)
	}
	doc, err := (&jcs.Options{MaxSize: MaxPolicyBytes}).Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: document is not a JSON object", ErrInvalidPolicy)
	}
	return PolicyFromMap(m)
}

// PolicyFromMap reads a capability policy in the generic JSON form
// (map[string]any, []any, string, bool, nil, numbers as json.Number,
// float64 or Go integers). It checks the policy against
// arsia-capability-policy.schema.json (required members, no unknown
// members, exact capability names, the three statuses, max_risk_level 0
// to 10, token_lifetime_seconds ≥ 1) and then the rules the schema cannot
// state: no capability named by two rules (ErrDuplicateCapability), no
// "arsiaprotocol." capability outside the 16 reserved ones
// (ErrReservedCapability), and token_lifetime_seconds at most
// MaxTokenLifetimeSeconds. Every problem found is reported; the error
// wraps ErrInvalidPolicy and the specific sentinels.
func PolicyFromMap(m map[string]any) (*CapabilityPolicy, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: no policy", ErrInvalidPolicy)
	}
	errs := schemaProblems(m)
	p := policyFromGeneric(m)
	errs = append(errs, p.ruleProblems()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Validate checks p as PolicyFromMap checks a document. Errors wrap
// ErrInvalidPolicy.
func (p *CapabilityPolicy) Validate() error {
	if p == nil {
		return fmt.Errorf("%w: no policy", ErrInvalidPolicy)
	}
	errs := schemaProblems(p.Map())
	errs = append(errs, p.ruleProblems()...)
	return errors.Join(errs...)
}

// Warnings returns the policy's legal but doubtful settings: a token
// lifetime outside the recommended 900 to 86400 seconds, and no rules at
// all (every request would be denied).
func (p *CapabilityPolicy) Warnings() []string {
	if p == nil {
		return nil
	}
	var w []string
	if p.TokenLifetimeSeconds < RecommendedMinTokenLifetimeSeconds || p.TokenLifetimeSeconds > RecommendedMaxTokenLifetimeSeconds {
		w = append(w, fmt.Sprintf("token_lifetime_seconds %d is outside the recommended %d to %d",
			p.TokenLifetimeSeconds, RecommendedMinTokenLifetimeSeconds, RecommendedMaxTokenLifetimeSeconds))
	}
	if len(p.Capabilities) == 0 {
		w = append(w, "the policy has no capability rules: every request will be denied")
	}
	return w
}

// TokenLifetime returns TokenLifetimeSeconds as a duration.
func (p *CapabilityPolicy) TokenLifetime() time.Duration {
	if p == nil || p.TokenLifetimeSeconds < 0 || p.TokenLifetimeSeconds > MaxTokenLifetimeSeconds {
		return 0
	}
	return time.Duration(p.TokenLifetimeSeconds) * time.Second
}

// Rule returns the rule that names capability exactly.
func (p *CapabilityPolicy) Rule(capability string) (CapabilityRule, bool) {
	if p == nil {
		return CapabilityRule{}, false
	}
	for _, r := range p.Capabilities {
		if r.Capability == capability {
			return r, true
		}
	}
	return CapabilityRule{}, false
}

// Map returns p in the generic JSON form, max_risk_level and conditions
// only when set.
func (p *CapabilityPolicy) Map() map[string]any {
	if p == nil {
		return nil
	}
	rules := make([]any, len(p.Capabilities))
	for i, r := range p.Capabilities {
		m := map[string]any{"capability": r.Capability, "status": string(r.Status)}
		if r.MaxRiskLevel != nil {
			m["max_risk_level"] = *r.MaxRiskLevel
		}
		if r.Conditions != "" {
			m["conditions"] = r.Conditions
		}
		rules[i] = m
	}
	return map[string]any{
		"policy_version":         p.PolicyVersion,
		"token_lifetime_seconds": p.TokenLifetimeSeconds,
		"capabilities":           rules,
	}
}

// MarshalJSON encodes Map.
func (p *CapabilityPolicy) MarshalJSON() ([]byte, error) { return json.Marshal(p.Map()) }

// UnmarshalJSON decodes and validates a policy as ParsePolicy does.
func (p *CapabilityPolicy) UnmarshalJSON(data []byte) error {
	q, err := ParsePolicy(data)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

// schemaProblems checks v against the policy schema. A validator failure
// is a problem too: the policy is then not known to be valid.
func schemaProblems(v any) []error {
	serrs, err := schema.Validate(v, PolicySchema)
	if err != nil {
		return []error{fmt.Errorf("%w: schema check failed: %v", ErrInvalidPolicy, err)}
	}
	out := make([]error, 0, len(serrs))
	for _, e := range serrs {
		out = append(out, fmt.Errorf("%w: %s", ErrInvalidPolicy, e.String()))
	}
	return out
}

// ruleProblems checks what the schema cannot: duplicates, the reserved
// namespace and the lifetime ceiling; it also names wildcards, which the
// schema refuses with a generic grammar message.
func (p *CapabilityPolicy) ruleProblems() []error {
	var errs []error
	if p.TokenLifetimeSeconds > MaxTokenLifetimeSeconds {
		errs = append(errs, fmt.Errorf("%w: token_lifetime_seconds %d exceeds %d", ErrInvalidPolicy, p.TokenLifetimeSeconds, MaxTokenLifetimeSeconds))
	}
	first := make(map[string]int, len(p.Capabilities))
	for i, r := range p.Capabilities {
		if j, dup := first[r.Capability]; dup {
			errs = append(errs, policyProblem(ErrDuplicateCapability, "/capabilities/%d/capability: duplicate capability %q (first at /capabilities/%d)", i, r.Capability, j))
			continue
		}
		first[r.Capability] = i
		if arsia.IsWildcardCapability(r.Capability) {
			errs = append(errs, policyProblem(ErrInvalidPolicy, "/capabilities/%d/capability: wildcard %q is not allowed in a policy rule; name each capability", i, r.Capability))
		}
		if strings.HasPrefix(r.Capability, arsia.ReservedCapabilityPrefix) {
			if err := arsia.ValidateCapability(r.Capability); errors.Is(err, arsia.ErrReservedCapability) {
				errs = append(errs, policyProblem(ErrReservedCapability, "/capabilities/%d/capability: %v", i, err))
			}
		}
	}
	return errs
}

// policyError is a policy problem of a specific kind: its text starts
// with ErrInvalidPolicy's, and it wraps both sentinels.
type policyError struct {
	kind error
	msg  string
}

func (e *policyError) Error() string   { return ErrInvalidPolicy.Error() + ": " + e.msg }
func (e *policyError) Unwrap() []error { return []error{ErrInvalidPolicy, e.kind} }

func policyProblem(kind error, format string, args ...any) error {
	return &policyError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// policyFromGeneric copies what it can read of m; the schema check
// reports what it cannot.
func policyFromGeneric(m map[string]any) *CapabilityPolicy {
	p := &CapabilityPolicy{}
	p.PolicyVersion, _ = m["policy_version"].(string)
	if n, ok := intValue(m["token_lifetime_seconds"]); ok && n >= 0 && n <= math.MaxInt32 {
		p.TokenLifetimeSeconds = int(n)
	} else if ok && n > math.MaxInt32 {
		p.TokenLifetimeSeconds = math.MaxInt32 // refused by ruleProblems
	}
	list, _ := m["capabilities"].([]any)
	for _, item := range list {
		rm, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var r CapabilityRule
		r.Capability, _ = rm["capability"].(string)
		s, _ := rm["status"].(string)
		r.Status = Status(s)
		if n, ok := intValue(rm["max_risk_level"]); ok && n >= 0 && n <= MaxRiskLevel {
			level := int(n)
			r.MaxRiskLevel = &level
		}
		r.Conditions, _ = rm["conditions"].(string)
		p.Capabilities = append(p.Capabilities, r)
	}
	return p
}

// intValue reads an integral JSON number in any of the generic forms;
// like the schema's "integer", it accepts 3600.0.
func intValue(v any) (int64, bool) {
	var f float64
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint32:
		return int64(n), true
	case float64:
		f = n
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || f < -(1<<53) || f > 1<<53 {
		return 0, false
	}
	return int64(f), true
}
