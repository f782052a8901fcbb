package identity

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// Policy is a receiver's minimum trust level per capability and per
// compliance profile. A request must meet the highest level that applies
// to it: Default, the entry of every capability pattern covering one of
// its capabilities, and the entry of its compliance profile. The minimum
// is never below L1.
//
// A capability pattern is a capability ("payments.execute") or a wildcard
// ending in ".*" ("payments.*" covers "payments.execute" and
// "payments.sepa.execute", not "payments"). Unlike a grant
// (arsia.MatchCapability), a requirement also covers the explicit-grant-
// only capabilities: "arsiaprotocol.*" applies to arsiaprotocol.state.purge.
//
// The zero Policy requires L1, which every agent meets.
type Policy struct {
	Default      TrustLevel
	ByCapability map[string]TrustLevel
	// ByProfile is keyed by the effective compliance profile name, exact
	// and case-sensitive ("MIFID-II").
	ByProfile map[string]TrustLevel
}

// Validate reports entries that cannot be meant: a level that is not
// L1-L3 (Default may also be zero, meaning L1), a capability pattern that
// fails arsia.ValidateCapability, or an empty profile name. Required and
// Check stay fail-closed on a policy that does not validate: a level above
// L3 can never be met.
func (p Policy) Validate() error {
	if p.Default != 0 && !p.Default.Valid() {
		return fmt.Errorf("%w: Default is %v", ErrInvalidPolicy, p.Default)
	}
	for _, pat := range sortedKeys(p.ByCapability) {
		if err := arsia.ValidateCapability(pat); err != nil {
			return fmt.Errorf("%w: capability pattern %q: %w", ErrInvalidPolicy, pat, err)
		}
		if l := p.ByCapability[pat]; !l.Valid() {
			return fmt.Errorf("%w: capability pattern %q requires %v", ErrInvalidPolicy, pat, l)
		}
	}
	for _, name := range sortedKeys(p.ByProfile) {
		if name == "" {
			return fmt.Errorf("%w: empty profile name", ErrInvalidPolicy)
		}
		if l := p.ByProfile[name]; !l.Valid() {
			return fmt.Errorf("%w: profile %q requires %v", ErrInvalidPolicy, name, l)
		}
	}
	return nil
}

// Required returns the minimum trust level for a request carrying
// capabilities under the effective compliance profile ("" for none). A
// requested capability that is itself a wildcard or fails the grammar
// cannot be matched reliably, so every capability entry applies to it.
func (p Policy) Required(capabilities []string, profile string) TrustLevel {
	req := max(L1, p.Default)
	for _, c := range capabilities {
		exact := arsia.ValidateCapability(c) == nil && !arsia.IsWildcardCapability(c)
		for pat, l := range p.ByCapability {
			if !exact || covers(pat, c) {
				req = max(req, l)
			}
		}
	}
	if profile != "" {
		if l, ok := p.ByProfile[profile]; ok {
			req = max(req, l)
		}
	}
	return req
}

// covers reports whether a policy pattern applies to a concrete capability.
func covers(pattern, capability string) bool {
	if pattern == capability {
		return true
	}
	prefix, wild := strings.CutSuffix(pattern, "*")
	return wild && strings.HasSuffix(prefix, ".") && strings.HasPrefix(capability, prefix)
}

// Check returns nil when level meets Required(capabilities, profile), and
// otherwise an *arsia.Error with code forbidden, details
// {required_trust_level, actual_trust_level} ("L1".."L3"), wrapping
// ErrInsufficientTrust. A level that is not L1-L3 never meets a
// requirement.
func (p Policy) Check(level TrustLevel, capabilities []string, profile string) error {
	req := p.Required(capabilities, profile)
	if level.Valid() && req.Valid() && level >= req {
		return nil
	}
	return &arsia.Error{
		Code:        arsia.CodeForbidden,
		Description: "The sender's identity trust level is below the minimum required for this request.",
		Details: map[string]any{
			"required_trust_level": req.String(),
			"actual_trust_level":   level.String(),
		},
		Err: fmt.Errorf("%w: have %v, need %v", ErrInsufficientTrust, level, req),
	}
}

func sortedKeys(m map[string]TrustLevel) []string { return slices.Sorted(maps.Keys(m)) }
