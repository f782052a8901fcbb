package onboarding

import "errors"

// Sentinel errors. Every error this package returns wraps one of them, so
// callers branch with errors.Is; the texts after the sentinel's are for
// logs and may quote the input.
var (
	// ErrInvalidPolicy is wrapped by every capability policy problem.
	ErrInvalidPolicy = errors.New("onboarding: invalid capability policy")
	// ErrDuplicateCapability means two rules of a policy name the same
	// capability (ARSIA-Identity §8.2): a configuration bug, never
	// resolved by picking one. It comes wrapped with ErrInvalidPolicy.
	ErrDuplicateCapability = errors.New("onboarding: duplicate capability")
	// ErrReservedCapability means a policy rule uses the reserved
	// "arsiaprotocol." prefix for a capability that is not one of the 16
	// reserved ones. It comes wrapped with ErrInvalidPolicy.
	ErrReservedCapability = errors.New("onboarding: reserved capability prefix misused")

	// ErrUnknownClassification means an AI system classification is
	// missing or not one of the four EU AI Act classes.
	ErrUnknownClassification = errors.New("onboarding: unknown AI system classification")
	// ErrProfileRequired means a high-risk agent declared no compliance
	// profile (ARSIA-Identity §4.2).
	ErrProfileRequired = errors.New("onboarding: high-risk agent MUST declare a compliance profile")
	// ErrUnknownProfile means the declared compliance profile is not in
	// the registry.
	ErrUnknownProfile = errors.New("onboarding: unknown compliance profile")
	// ErrUnacceptableRisk means the agent is classified unacceptable-risk
	// and MUST NOT be onboarded (ARSIA-Identity §4.2).
	ErrUnacceptableRisk = errors.New("onboarding: unacceptable-risk agent MUST NOT be onboarded")
	// ErrClassificationEscalation means a declared classification ranks
	// above the identity record's (ARSIA-Core §4.3.8 R6).
	ErrClassificationEscalation = errors.New("onboarding: classification escalates above the identity record's")

	// ErrPhaseOrder means a phase or a Phase 1 step was skipped, repeated
	// or taken out of order (ARSIA-Identity §7.2: phases MUST NOT be
	// reordered or skipped), or taken after the flow ended.
	ErrPhaseOrder = errors.New("onboarding: phase out of order")

	// ErrInvalidDecision means a decision payload cannot be built from
	// the input: an invalid agent id, an unknown phase or denial reason,
	// or a phase that does not produce the reason.
	ErrInvalidDecision = errors.New("onboarding: invalid onboarding decision")

	// ErrTokenIssue means no access token may be issued for the decision
	// with the given options.
	ErrTokenIssue = errors.New("onboarding: cannot issue access token")
)
