package audit

import (
	"testing"
	"time"
)

// Every constructor names the subject the same way and sets its kind, and
// what it returns is a record the log accepts.
func TestKindConstructors(t *testing.T) {
	s := Subject{MessageID: "msg_1", Sender: "agent:a.one", Recipient: "agent:b.gw", Capability: "notes.read",
		Profile: "GDPR-GENERIC", Oversight: "required_post_execution", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	reviewer := Actor{ID: "bob", Type: "human", AuthenticatedBy: "token"}
	for _, tc := range []struct {
		rec  Record
		kind Kind
	}{
		{Received(s), KindReceived},
		{Approval(s, "apr_1", "res_1"), KindApproval},
		{Execution(s, "apr_1", "exc_1"), KindExecution},
		{OversightTimeout(s, "exc_1", now), KindOversightTimeout},
		{Review(s, "exc_1", reviewer, "accepted", true), KindReview},
		{Escalation(s, "apr_1", "reminder", now), KindEscalation},
		{BrokerRelay(s, map[string]any{"audit_type": "broker_relay", "relay_latency_ms": int64(3)}, "success", now), KindBrokerRelay},
	} {
		r := tc.rec
		if r.Kind != tc.kind || r.MessageID != s.MessageID || r.Sender != s.Sender || r.Recipient != s.Recipient ||
			r.Capability != s.Capability || r.Profile != s.Profile || r.Oversight != s.Oversight || r.TraceID != s.TraceID {
			t.Errorf("%s: %+v does not carry its subject", tc.kind, r)
		}
		r.Time = now
		if _, err := New(NewMemory(), nil).Append(t.Context(), r); err != nil {
			t.Errorf("%s: the log refuses the record: %v", tc.kind, err)
		}
	}
	if r := Execution(s, "", "exc_9"); r.Details["exchange_id"] != "exc_9" {
		t.Errorf("Execution details = %v", r.Details)
	}
	if r := OversightTimeout(s, "exc_1", now.In(time.FixedZone("x", 3600))); r.Details["due_at"] != "2026-12-02T05:00:00Z" || r.Outcome != "overdue" {
		t.Errorf("OversightTimeout = %+v", r)
	}
	if r := Review(s, "exc_1", reviewer, "rejected", false); r.Actor != reviewer || r.Outcome != "rejected" || r.Details["late"] != false {
		t.Errorf("Review = %+v", r)
	}
}
