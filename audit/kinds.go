package audit

import (
	"time"

	"github.com/custos-runtime/custos/asc"
)

// Subject is what a record is about: the ARSIA message, who sent it to
// whom, the capability it called and under which profile and oversight
// mode. Each kind's constructor below starts from one, so that every
// record of a request names it the same way.
type Subject struct {
	MessageID, Sender, Recipient, Capability, Profile, Oversight, TraceID string
}

func (s Subject) record(k Kind) Record {
	return Record{Kind: k, MessageID: s.MessageID, Sender: s.Sender, Recipient: s.Recipient, Capability: s.Capability,
		Profile: s.Profile, Oversight: s.Oversight, TraceID: s.TraceID}
}

// Received is the record of a request received: accepted
// (OutcomeAccepted) or refused (OutcomeRejected) — the caller sets
// which, and the payload hash once it is known.
func Received(s Subject) Record { return s.record(KindReceived) }

// Approval is the record of how the approval request requestID ended
// (resolutionID): the caller sets the outcome, the ASC code and the
// actor that decided.
func Approval(s Subject, requestID, resolutionID string) Record {
	r := s.record(KindApproval)
	r.RequestID, r.ResolutionID = requestID, resolutionID
	return r
}

// Execution is the record of a call of exchange exchangeID, approved as
// requestID ("" when none was needed): the caller sets the outcome and
// the ASC code once it ran.
func Execution(s Subject, requestID, exchangeID string) Record {
	r := s.record(KindExecution)
	r.RequestID = requestID
	r.Details = map[string]any{"exchange_id": exchangeID}
	return r
}

// OversightTimeout is the record of a required review of exchange
// exchangeID that did not happen by due.
func OversightTimeout(s Subject, exchangeID string, due time.Time) Record {
	r := s.record(KindOversightTimeout)
	r.Outcome, r.ASCCode = "overdue", int(asc.Timeout)
	r.Details = map[string]any{"exchange_id": exchangeID, "due_at": due.UTC().Format(time.RFC3339)}
	return r
}

// Review is the record of reviewer's verdict on the executed call of
// exchange exchangeID; late says the review was overdue when it came.
func Review(s Subject, exchangeID string, reviewer Actor, verdict string, late bool) Record {
	r := s.record(KindReview)
	r.Actor, r.Outcome, r.ASCCode = reviewer, verdict, int(asc.Success)
	r.Details = map[string]any{"exchange_id": exchangeID, "late": late}
	return r
}

// Escalation is the record of a follow-up step (a reminder, an
// escalation, the deadline) on approval request requestID, at now.
func Escalation(s Subject, requestID, step string, now time.Time) Record {
	r := s.record(KindEscalation)
	r.Time, r.RequestID, r.Outcome = now, requestID, step
	return r
}

// TokenIssued is the record of an access token issued to agent (sub) for
// recipient (aud): its jti, scope, expiry and, for a DPoP-bound token,
// the key thumbprint. The token itself is never recorded.
func TokenIssued(agent, recipient, jti string, scope []string, jkt string, expires time.Time) Record {
	d := map[string]any{"jti": jti, "scope": anyList(scope), "expires_at": expires.UTC().Format(time.RFC3339)}
	if jkt != "" {
		d["cnf_jkt"] = jkt
	}
	return Record{Kind: KindTokenIssued, Sender: agent, Recipient: recipient, Outcome: "issued",
		Actor: Actor{ID: agent, Type: ActorAgent, AuthenticatedBy: "private_key_jwt"}, Details: d}
}

// TokenRevoked is the record of agent revoking its token jti.
func TokenRevoked(agent, recipient, jti string) Record {
	return Record{Kind: KindTokenRevoked, Sender: agent, Recipient: recipient, Outcome: "revoked",
		Actor: Actor{ID: agent, Type: ActorAgent, AuthenticatedBy: "private_key_jwt"}, Details: map[string]any{"jti": jti}}
}

// BrokerRelay is the record of a relay of the message s names (its
// Recipient the agent relayed to): relay is the ARSIA relay audit record
// (arsia.RelayAuditRecord.Map, 11 members, no payload), result its
// forwarding_result, at relayed.
func BrokerRelay(s Subject, relay map[string]any, result string, relayed time.Time) Record {
	r := s.record(KindBrokerRelay)
	r.Time, r.Outcome, r.Details = relayed, result, relay
	return r
}

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
