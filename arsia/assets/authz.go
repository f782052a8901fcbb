package assets

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// capabilityRisk is the risk level of each Assets capability (§5.1).
var capabilityRisk = map[string]int{
	arsia.CapAssetsTransferInitiate: 5,
	arsia.CapAssetsTransferApprove:  7,
	arsia.CapAssetsTransferReverse:  6,
	arsia.CapAssetsEscrowCreate:     5,
	arsia.CapAssetsEscrowRelease:    7,
	arsia.CapAssetsEscrowCancel:     6,
	arsia.CapAssetsAuditRead:        3,
}

// CapabilityRiskLevels returns the risk level of each of the seven
// reserved Assets capabilities (§5.1): transfer.initiate 5,
// transfer.approve 7, transfer.reverse 6, escrow.create 5, escrow.release
// 7, escrow.cancel 6, assets.audit.read 3. The map is a copy.
func CapabilityRiskLevels() map[string]int { return maps.Clone(capabilityRisk) }

// CapabilityRiskLevel returns the risk level of one Assets capability; ok
// is false for any other capability.
func CapabilityRiskLevel(capability string) (level int, ok bool) {
	level, ok = capabilityRisk[capability]
	return level, ok
}

// SCARiskThreshold is the risk level from which a financial operation
// needs PSD2 strong customer authentication and two-party approval
// (§5.2, §6.3).
const SCARiskThreshold = 7

// RequiresSCA reports whether an operation of this risk level needs PSD2
// strong customer authentication: risk ≥ 7. A level outside 0-10 is an
// error (ErrRiskLevel); callers must then refuse the operation.
func RequiresSCA(riskLevel int) (bool, error) {
	if riskLevel < arsia.MinRiskLevel || riskLevel > arsia.MaxRiskLevel {
		return true, fmt.Errorf("%w: %d", ErrRiskLevel, riskLevel)
	}
	return riskLevel >= SCARiskThreshold, nil
}

// CheckTwoPartyApproval checks the approver of a high-risk transfer
// (§5.2): it must be a valid agent distinct from the initiator and hold
// both arsiaprotocol.assets.transfer.approve and
// arsiaprotocol.oversight.approve (matched as scope entries with
// arsia.MatchCapability, so oversight.approve must be granted explicitly).
// Failures carry code forbidden with the details
// {required_capabilities, provided_capabilities}.
func CheckTwoPartyApproval(initiator, approver string, approverCapabilities []string) []*Error {
	var p problems
	required := []string{arsia.CapAssetsTransferApprove, arsia.CapOversightApprove}
	details := func() map[string]any {
		return map[string]any{"required_capabilities": anyList(required), "provided_capabilities": anyList(approverCapabilities)}
	}
	if !arsia.ValidAgentID(approver) {
		p = append(p, forbidden("/approver", "two-party approval refused: the approver is not a valid agent identifier", details()))
	}
	if !arsia.ValidAgentID(initiator) {
		p.invalid("/initiator", ErrForbidden, "two-party approval cannot be checked: the initiator is not a valid agent identifier")
	}
	if approver == initiator {
		e := forbidden("/approver", "two-party approval refused: approver and initiator must be distinct agents (separation of duties)", details())
		e.Err = ErrSeparationOfDuties
		p = append(p, e)
	}
	var missing []string
	for _, r := range required {
		if !slices.ContainsFunc(approverCapabilities, func(s string) bool { return arsia.MatchCapability(s, r) }) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		p = append(p, forbidden("/approver", "two-party approval refused: approver is missing required capabilities: "+strings.Join(missing, ", "), details()))
	}
	return p
}

// ValidateTokenScope enforces the separation of duties of §5.1.2: no
// access token may grant both arsiaprotocol.assets.transfer.initiate and
// arsiaprotocol.assets.transfer.approve, whether by name or through
// wildcard entries such as "arsiaprotocol.assets.*". scope is the token's
// scope claim split on spaces (strings.Fields). The error has code
// forbidden and wraps ErrSeparationOfDuties.
func ValidateTokenScope(scope []string) *Error {
	grants := func(c string) []string {
		var by []string
		for _, s := range scope {
			if arsia.MatchCapability(s, c) {
				by = append(by, s)
			}
		}
		return by
	}
	initiate, approve := grants(arsia.CapAssetsTransferInitiate), grants(arsia.CapAssetsTransferApprove)
	if len(initiate) == 0 || len(approve) == 0 {
		return nil
	}
	conflicting := slices.Compact(slices.Sorted(slices.Values(append(initiate, approve...))))
	e := forbidden("/scope", fmt.Sprintf("token scope violates separation of duties: it grants both %s and %s (via %s)",
		arsia.CapAssetsTransferInitiate, arsia.CapAssetsTransferApprove, strings.Join(conflicting, ", ")),
		map[string]any{"separation_of_duties_violation": true, "conflicting_capabilities": anyList(conflicting)})
	e.Err = ErrSeparationOfDuties
	return e
}

// SCA exemption reasons (§6.3.3), as recorded in the audit trail.
const (
	ExemptLowValue           = "low_value"
	ExemptRecurring          = "recurring"
	ExemptTrustedBeneficiary = "trusted_beneficiary"
)

// Low-value exemption limits (Commission Delegated Regulation (EU)
// 2018/389, Art. 16), in EUR.
var (
	lowValueLimit           = MustParseAmount("30")
	lowValueCumulativeLimit = MustParseAmount("100")
)

// SCAExemption describes a payment for IsSCAExempt.
type SCAExemption struct {
	// Amount and Currency are the payment's. The low-value exemption is
	// defined in euros only: no conversion is attempted.
	Amount   Amount
	Currency string
	// CumulativeSinceSCA, when set, is the total of the payments since
	// the last strong authentication, this one included; the low-value
	// exemption then also needs it ≤ EUR 100.
	CumulativeSinceSCA *Amount
	// Recurring: same amount, same payee, same frequency, as the
	// authorization server's policy established.
	Recurring bool
	// TrustedBeneficiary: the payee is on the payer's trusted list.
	TrustedBeneficiary bool
}

// IsSCAExempt reports whether a payment is exempt from strong customer
// authentication (§6.3.3) and why: ExemptLowValue for a positive EUR
// amount ≤ 30 (and a known cumulative total ≤ 100), ExemptRecurring,
// ExemptTrustedBeneficiary, checked in that order. Anything else is not
// exempt (reason "").
func IsSCAExempt(x SCAExemption) (exempt bool, reason string) {
	switch {
	case x.Currency == "EUR" && x.Amount.Sign() > 0 && x.Amount.Cmp(lowValueLimit) <= 0 &&
		(x.CumulativeSinceSCA == nil || x.CumulativeSinceSCA.Cmp(lowValueCumulativeLimit) <= 0):
		return true, ExemptLowValue
	case x.Recurring:
		return true, ExemptRecurring
	case x.TrustedBeneficiary:
		return true, ExemptTrustedBeneficiary
	}
	return false, ""
}

// SCAFactors are the authentication elements presented for a financial
// operation of risk ≥ 7 (§6.3).
type SCAFactors struct {
	// Knowledge: the authorization server authenticated the approver (or
	// operator) with a knowledge factor.
	Knowledge bool
	// Possession: a signature (Option A, the approval_decision) or a DPoP
	// proof (Option B) proved possession of a private key.
	Possession bool
	// CNF is the access token's cnf claim. nil selects Option A (human
	// oversight flow); any non-nil map, even empty, selects Option B
	// (hardware-bound token), which needs cnf.jkt.
	CNF map[string]any
}

// jktRE is an RFC 7638 SHA-256 thumbprint in base64url without padding.
var jktRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// ValidateSCAFactors checks that the presented factors satisfy PSD2
// strong customer authentication (§6.3): a knowledge and a possession
// factor under both options, and for Option B a cnf claim whose jkt is a
// SHA-256 JWK thumbprint. Problems carry code unauthorized.
func ValidateSCAFactors(f SCAFactors) []*Error {
	var p problems
	if !f.Knowledge {
		p.add(arsia.CodeUnauthorized, "", ErrSCA, "PSD2 SCA requires a knowledge factor")
	}
	if !f.Possession {
		p.add(arsia.CodeUnauthorized, "", ErrSCA, "PSD2 SCA requires a possession factor")
	}
	if f.CNF != nil {
		jkt, ok := f.CNF["jkt"].(string)
		switch {
		case !ok:
			p.add(arsia.CodeUnauthorized, "/cnf/jkt", ErrSCA, "PSD2 SCA Option B requires a cnf claim with jkt (the hardware-bound key's thumbprint)")
		case !jktRE.MatchString(jkt):
			p.add(arsia.CodeUnauthorized, "/cnf/jkt", ErrSCA, "PSD2 SCA Option B: cnf.jkt is not a base64url SHA-256 JWK thumbprint")
		}
	}
	return p
}

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
