package arsia

import (
	"fmt"
	"slices"
	"strings"
)

// MaxCapabilityLength is the longest capability, in characters.
const MaxCapabilityLength = 128

// ReservedCapabilityPrefix is the namespace owned by the protocol.
const ReservedCapabilityPrefix = "arsiaprotocol."

// Reserved capabilities (ARSIA-Actions §1.4).
const (
	CapOversightApprove       = "arsiaprotocol.oversight.approve"
	CapBrokerRelay            = "arsiaprotocol.broker.relay"
	CapAuditRead              = "arsiaprotocol.audit.read"
	CapIdentityAdmin          = "arsiaprotocol.identity.admin"
	CapStateRead              = "arsiaprotocol.state.read"
	CapStateWrite             = "arsiaprotocol.state.write"
	CapStatePurge             = "arsiaprotocol.state.purge"
	CapStateSnapshot          = "arsiaprotocol.state.snapshot"
	CapAssetsTransferInitiate = "arsiaprotocol.assets.transfer.initiate"
	CapAssetsTransferApprove  = "arsiaprotocol.assets.transfer.approve"
	CapAssetsTransferReverse  = "arsiaprotocol.assets.transfer.reverse"
	CapAssetsEscrowCreate     = "arsiaprotocol.assets.escrow.create"
	CapAssetsEscrowRelease    = "arsiaprotocol.assets.escrow.release"
	CapAssetsEscrowCancel     = "arsiaprotocol.assets.escrow.cancel"
	CapAssetsAuditRead        = "arsiaprotocol.assets.audit.read"
	CapComplianceBreachNotify = "arsiaprotocol.compliance.breach.notify"
)

var reservedCapabilities = []string{
	CapOversightApprove, CapBrokerRelay, CapAuditRead, CapIdentityAdmin,
	CapStateRead, CapStateWrite, CapStatePurge, CapStateSnapshot,
	CapAssetsTransferInitiate, CapAssetsTransferApprove, CapAssetsTransferReverse,
	CapAssetsEscrowCreate, CapAssetsEscrowRelease, CapAssetsEscrowCancel,
	CapAssetsAuditRead, CapComplianceBreachNotify,
}

// explicitGrantOnly capabilities are never granted through a wildcard
// scope entry (ARSIA-Actions §1.2 condition 3, §1.4).
var explicitGrantOnly = []string{CapStatePurge, CapStateSnapshot, CapOversightApprove}

// ReservedCapabilities returns the 16 reserved capabilities.
func ReservedCapabilities() []string { return slices.Clone(reservedCapabilities) }

// IsReservedCapability reports whether c is one of the 16 reserved
// capabilities.
func IsReservedCapability(c string) bool { return slices.Contains(reservedCapabilities, c) }

// IsExplicitGrantOnly reports whether c can be granted only by naming it
// exactly in a scope (arsiaprotocol.state.purge, .state.snapshot,
// .oversight.approve).
func IsExplicitGrantOnly(c string) bool { return slices.Contains(explicitGrantOnly, c) }

// IsWildcardCapability reports whether c ends in ".*".
func IsWildcardCapability(c string) bool { return strings.HasSuffix(c, ".*") }

// capabilityGrammarProblem checks the ABNF of ARSIA-Actions §1.1:
// dot-separated segments of ASCII letters and digits (a segment may start
// with a digit; the JSON Schemas are stricter and require a letter), at
// least two segments, or at least one followed by a final ".*".
func capabilityGrammarProblem(c string) string {
	body, wildcard := strings.CutSuffix(c, ".*")
	segs := strings.Split(body, ".")
	if !wildcard && len(segs) < 2 {
		return "needs at least two dot-separated segments"
	}
	for _, s := range segs {
		if s == "" {
			return "has an empty segment"
		}
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case isAlnum(c):
			case c == '*':
				return "may use '*' only as the whole last segment"
			case c == '-':
				return "contains a hyphen; segments allow only letters and digits"
			default:
				return fmt.Sprintf("contains %s; segments allow only letters and digits", pyRepr(string(c)))
			}
		}
	}
	return ""
}

// ValidateCapability checks c against the capability grammar, the length
// limit and the reserved namespace. The error is an *Error whose Code is
// empty_capability, capability_too_long, invalid_capability_grammar
// (wrapping ErrInvalidCapability) or reserved_prefix_misuse (wrapping
// ErrReservedCapability). A wildcard in the reserved namespace is valid
// only when it covers at least one reserved capability (arsiaprotocol.*,
// arsiaprotocol.state.*).
func ValidateCapability(c string) error {
	if c == "" {
		return newError("empty_capability", ErrInvalidCapability, "capability is empty")
	}
	if len(c) > MaxCapabilityLength {
		return newError("capability_too_long", ErrInvalidCapability,
			"capability is %d characters long, more than %d", len(c), MaxCapabilityLength)
	}
	if p := capabilityGrammarProblem(c); p != "" {
		return newError("invalid_capability_grammar", ErrInvalidCapability,
			"capability %s does not match the capability grammar: it %s", pyRepr(c), p)
	}
	if strings.HasPrefix(c, ReservedCapabilityPrefix) {
		ok := IsReservedCapability(c)
		if prefix, wild := strings.CutSuffix(c, "*"); wild {
			ok = slices.ContainsFunc(reservedCapabilities, func(r string) bool { return strings.HasPrefix(r, prefix) })
		}
		if !ok {
			return newError("reserved_prefix_misuse", ErrReservedCapability,
				"capability %s uses the reserved 'arsiaprotocol.' prefix but is not one of the 16 reserved capabilities", pyRepr(c))
		}
	}
	return nil
}

// MatchCapability reports whether one scope entry (from a token or policy)
// grants the requested capability: an exact match, or a wildcard entry
// "p.*" and a request that starts with "p." (so "notes.*" grants
// "notes.read" and "notes.a.b" but not "notes"). A wildcard never grants an
// explicit-grant-only capability, a request that is itself a wildcard is
// never granted, and an entry or request that fails ValidateCapability
// grants or is granted nothing.
func MatchCapability(scopeEntry, requested string) bool {
	if ValidateCapability(scopeEntry) != nil || ValidateCapability(requested) != nil {
		return false
	}
	if IsWildcardCapability(requested) {
		return false
	}
	if scopeEntry == requested {
		return true
	}
	prefix, wild := strings.CutSuffix(scopeEntry, "*")
	if !wild || IsExplicitGrantOnly(requested) {
		return false
	}
	return strings.HasPrefix(requested, prefix)
}

// grantedBy reports whether some entry of scope grants requested.
func grantedBy(scope []string, requested string) bool {
	return slices.ContainsFunc(scope, func(s string) bool { return MatchCapability(s, requested) })
}

// MatchCapabilities reports whether scope grants every requested
// capability. An empty request is not granted: a request must name what it
// needs (L2 refuses empty capabilities).
func MatchCapabilities(scope, requested []string) bool {
	if len(requested) == 0 {
		return false
	}
	for _, r := range requested {
		if !grantedBy(scope, r) {
			return false
		}
	}
	return true
}

// DowngradeCapabilities returns the requested capabilities that scope
// grants, in request order and without repeats: the effective_capabilities
// of a downgraded response (ARSIA-Actions §1.3). When none is granted it
// returns an *Error with code forbidden and the normative details
// {required_capabilities, provided_capabilities}, ready to send; it wraps
// ErrNoEffectiveCapabilities.
func DowngradeCapabilities(requested, scope []string) ([]string, error) {
	var effective []string
	for _, r := range requested {
		if !slices.Contains(effective, r) && grantedBy(scope, r) {
			effective = append(effective, r)
		}
	}
	if len(effective) == 0 {
		return nil, &Error{
			Code:        CodeForbidden,
			Description: "None of the requested capabilities is granted.",
			Details: map[string]any{
				"required_capabilities": anyStrings(requested),
				"provided_capabilities": anyStrings(scope),
			},
			Err: ErrNoEffectiveCapabilities,
		}
	}
	return effective, nil
}

func anyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
