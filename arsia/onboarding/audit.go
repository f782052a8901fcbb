package onboarding

// Onboarding audit events (ARSIA-Identity §9.3).
const (
	EventApprovalDecision  = "approval_decision"
	EventAgentOnboarded    = "agent_onboarded"
	EventAgentRejected     = "agent_rejected"
	EventCapabilityGranted = "capability_granted"
	EventCapabilityRevoked = "capability_revoked"
	EventTokenIssued       = "token_issued"
	EventTokenRevoked      = "token_revoked"
)

// AuditEvents returns the seven onboarding audit event names of
// ARSIA-Identity §9.3.
func AuditEvents() []string {
	return []string{EventApprovalDecision, EventAgentOnboarded, EventAgentRejected,
		EventCapabilityGranted, EventCapabilityRevoked, EventTokenIssued, EventTokenRevoked}
}
