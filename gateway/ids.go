package gateway

import (
	"encoding/json"
	"strings"

	"github.com/custos-runtime/custos/aais"
)

// ExchangeExtension is the AAIS request extension naming the exchange an
// approval belongs to, with what the call needs besides the action.
const ExchangeExtension = "custos.dev/exchange"

// ExchangeRef is the value of ExchangeExtension: what the gateway needs
// to resume the call once the approval is resolved, and what the reviewer
// surfaces read of it (the profile for roles, the sender for separation of
// duties).
type ExchangeRef struct {
	ExchangeID  string `json:"exchange_id"`
	Sender      string `json:"sender"`
	MessageID   string `json:"message_id"`
	PayloadType string `json:"payload_type"`
	TraceID     string `json:"trace_id,omitempty"`
	// SpanID is the request's span, sampled, when tracing was on: the
	// parent of the span that resumes the exchange.
	SpanID  string `json:"span_id,omitempty"`
	Profile string `json:"profile,omitempty"`
	// IdempotencyKey is the request's key, forwarded to the handler.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Effective are the capabilities granted when fewer than requested.
	Effective []string `json:"effective_capabilities,omitempty"`
	// Explain: the request's effective profile requires an explanation
	// with the result (handler.Call.ExplanationRequired).
	Explain bool `json:"explanation_required,omitempty"`
	// EncryptedReply: the request was encrypted, and so is every reply to
	// it, to the sender's encryption key.
	EncryptedReply bool `json:"encrypted_reply,omitempty"`
	// Compliance and Timestamp are the request's compliance object and
	// ts (handler.Call.Compliance, .Timestamp), for the handlers whose
	// rules depend on them (state: legal basis, residency, retention).
	Compliance map[string]any `json:"compliance,omitempty"`
	Timestamp  string         `json:"ts,omitempty"`
}

// ExchangeRefOf reads the ExchangeExtension of req; false when req has none
// or it is not an object of this shape (a request the gateway did not
// make).
func ExchangeRefOf(req *aais.Request) (ExchangeRef, bool) {
	var ref ExchangeRef
	raw, ok := req.Extensions[ExchangeExtension]
	if !ok || json.Unmarshal(raw, &ref) != nil {
		return ExchangeRef{}, false
	}
	return ref, true
}

// The exchange an approval belongs to is named by the approval's id: the
// gateway names the approval of exc_X apr_X, and a request a reviewer's
// edit made of it apr_X-eN (supersede.go).

// ApprovalOf is the id of the approval of exchange id.
func ApprovalOf(exchangeID string) string { return "apr_" + strings.TrimPrefix(exchangeID, "exc_") }

// ExchangeOfApproval is the exchange id an approval request id belongs to,
// false when it is not one of the gateway's.
func ExchangeOfApproval(requestID string) (string, bool) {
	rest, ok := strings.CutPrefix(requestID, "apr_")
	if !ok {
		return "", false
	}
	if i := strings.Index(rest, "-e"); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		return "", false
	}
	return "exc_" + rest, true
}

// RequestProfile is the compliance profile a gateway's approval request
// names in its ExchangeExtension ("" when none): the ProfileOf of the
// remember policy of Options.Remember.
func RequestProfile(req *aais.Request) string {
	if req == nil {
		return ""
	}
	ref, _ := ExchangeRefOf(req)
	return ref.Profile
}
