package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/jcs"
)

// Kind says what a record is about. It is an open string: the constants
// below are the kinds Custos writes; other components may add their own
// (lower-case, snake_case).
type Kind string

// The kinds of record Custos writes.
const (
	// KindReceived: a message arrived (an ARSIA envelope or an MCP/A2A
	// call). Written before the message is acted on.
	KindReceived Kind = "received"
	// KindDecision: the gateway's own verdict on a message (identity,
	// structure, authorization, compliance rules): Outcome is allowed,
	// rejected or pending (waiting for human approval).
	KindDecision Kind = "decision"
	// KindApproval: a human or policy answered an AAIS approval request
	// (RequestID, ResolutionID, Actor): Outcome approved, denied or expired.
	KindApproval Kind = "approval"
	// KindExecution: the action ran (or failed to run): Outcome succeeded or
	// failed, with the ASC code of the result.
	KindExecution Kind = "execution"
	// KindOversightTimeout: a required human review did not happen in time
	// (compliance.CheckOversightTimeout).
	KindOversightTimeout Kind = "oversight_timeout"
	// KindReview: a reviewer's verdict on an action that ran before its
	// required review (post-execution oversight); Outcome is the verdict.
	KindReview Kind = "review"
	// KindEscalation: the runtime followed up on a request or a review
	// nobody decided in time: a reminder, an escalation to another group
	// or channel, or the deadline's expiry or denial (package notify's
	// Escalator; Outcome names the step).
	KindEscalation Kind = "escalation"
	// KindTokenIssued and KindTokenRevoked: the gateway's authorization
	// server issued or revoked an access token (ARSIA-Identity §9.3).
	KindTokenIssued  Kind = "token_issued"
	KindTokenRevoked Kind = "token_revoked"
	// KindResponse: a response envelope was sent back.
	KindResponse Kind = "response"
	// KindPurge: written by Log.Purge after it redacted expired records;
	// Details has "redacted" (count), "first_seq" and "last_seq".
	KindPurge Kind = "purge"
	// KindCheckpoint: a signed statement of the record before it (Log.
	// Checkpoint); Details has "checkpoint" (seq, hash, time), "kid" and
	// "signature".
	KindCheckpoint Kind = "checkpoint"
	// KindCertificate: the gateway's issuing CA issued (Outcome "issued")
	// or revoked ("revoked") an agent certificate; Details has its serial,
	// validity and, for a revocation, the reason.
	KindCertificate Kind = "certificate"
	// KindOnboarding: the gateway decided on an agent's onboarding request
	// (ARSIA-Identity §7.6, event approval_decision): Outcome approved or
	// denied; Details has the decision result (never its token), the
	// phases and phase 1 steps completed, and the onboarding events.
	KindOnboarding Kind = "onboarding"
	// KindBrokerRelay: the gateway, as a Compliance Broker, relayed a
	// message to another agent, or refused to (ARSIA-Routing §7.4);
	// Details is the ARSIA relay audit record, exactly its 11 members,
	// and Outcome its forwarding_result (success, failure, timeout).
	KindBrokerRelay Kind = "broker_relay"
)

// Outcomes Custos writes. Outcome is an open string like Kind.
const (
	OutcomeAccepted  = "accepted"  // a received message passed intake
	OutcomeAllowed   = "allowed"   // a decision let the action run
	OutcomeRejected  = "rejected"  // a decision refused the message
	OutcomePending   = "pending"   // waiting for human approval
	OutcomeApproved  = "approved"  // approval granted
	OutcomeDenied    = "denied"    // approval refused
	OutcomeExpired   = "expired"   // approval or review deadline passed
	OutcomeSucceeded = "succeeded" // the execution succeeded
	OutcomeFailed    = "failed"    // the execution failed
	OutcomeRedacted  = "redacted"  // purge: records were redacted
)

// Actor types, as in AAIS.
const (
	ActorHuman  = "human"
	ActorPolicy = "policy"
	ActorAgent  = "agent"
)

// Genesis is the prev of the first record (seq 1).
const Genesis = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// MaxRecordSize caps the canonical JSON form of one record, details
// included. Audit records hold hashes and identifiers, not payloads.
const MaxRecordSize = 64 << 10

// maxSeq keeps seq exact in every JSON implementation (RFC 7493 §2.2).
const maxSeq = 1<<53 - 1

// TimeLayout is the form of every time in a record: RFC 3339, UTC,
// nanoseconds, always the same width, so that times sort as strings.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// Actor is who did what a record describes: the reviewer of an approval,
// the policy that decided, the agent that sent a message.
type Actor struct {
	// ID is the actor's identifier (user id, policy name, agent id).
	ID string `json:"id,omitempty"`
	// Type is human, policy or agent (ActorHuman, ...).
	Type string `json:"type,omitempty"`
	// AuthenticatedBy names the channel that authenticated the actor
	// (local-session, oidc, mtls, arsia-signature, ...). An actor claimed
	// in a message body is not authenticated.
	AuthenticatedBy string `json:"authenticated_by,omitempty"`
}

// IsZero reports whether a is the empty actor.
func (a Actor) IsZero() bool { return a == Actor{} }

// Record is one entry of the audit log. Its JSON form (snake_case members;
// empty members are left out) is what the hash covers; see the package
// documentation. Log.Append fills Seq, Prev, Hash and, when zero, Time and
// RetainUntil; callers fill the rest.
type Record struct {
	// Seq is the record's position: 1, 2, 3, ... without gaps.
	Seq uint64 `json:"seq"`
	// Time is when the event happened (UTC, nanoseconds); Append sets it
	// to the current time when zero. Times follow seq only roughly: a
	// caller may record an earlier event time, and writers' clocks differ.
	Time time.Time `json:"time"`
	// Kind says what the record is about (KindReceived, ...). Required.
	Kind Kind `json:"kind"`
	// MessageID is the ARSIA message id (envelope id) concerned.
	MessageID string `json:"message_id,omitempty"`
	// CorrelationID ties the records of one exchange together (ARSIA
	// correlation_id, or the id of the request a response answers).
	CorrelationID string `json:"correlation_id,omitempty"`
	// Sender is the agent id of the message's sender (ARSIA from).
	Sender string `json:"sender,omitempty"`
	// Recipient is the agent id of the message's recipient (ARSIA to).
	Recipient string `json:"recipient,omitempty"`
	// Capability is the capability (ARSIA intent, MCP tool, ...) invoked.
	Capability string `json:"capability,omitempty"`
	// PayloadHash is "sha256:" + hex SHA-256 of the RFC 8785 canonical
	// payload (see PayloadHash). The payload itself is never recorded.
	PayloadHash string `json:"payload_hash,omitempty"`
	// Profile is the effective ARSIA compliance profile (GDPR-STANDARD,
	// EU-AI-ACT-HIGH-RISK, ...; "none" when the message had none).
	Profile string `json:"profile,omitempty"`
	// Oversight is the effective human_oversight mode
	// (compliance.Oversight values).
	Oversight string `json:"oversight,omitempty"`
	// Actor is who acted (decided, approved, executed, sent).
	Actor Actor `json:"actor,omitzero"`
	// Outcome is what happened (OutcomeAllowed, ...).
	Outcome string `json:"outcome,omitempty"`
	// ASCCode is the ASC status code reported for the event (0: none).
	ASCCode int `json:"asc_code,omitempty"`
	// Status is the ASC status name of ASCCode.
	Status string `json:"status,omitempty"`
	// RequestID is the AAIS approval request id, when there is one.
	RequestID string `json:"request_id,omitempty"`
	// ResolutionID is the AAIS decision or resolution id, when there is
	// one.
	ResolutionID string `json:"resolution_id,omitempty"`
	// TraceID is the W3C trace id of the request (ASC provenance).
	TraceID string `json:"trace_id,omitempty"`
	// Details holds a few more facts (error detail, rule name, ...). Values
	// must be JSON values that RFC 8785 accepts (integers within ±2^53).
	// In records read back (and returned by Append) numbers are
	// json.Number.
	// Never put payloads or personal data here beyond what the record's
	// retention allows.
	Details map[string]any `json:"details,omitempty"`
	// ARSIA is the ARSIA audit record (ARSIA-State §7.1) of the envelope,
	// when the event concerns one; see FromARSIA.
	ARSIA *compliance.AuditRecord `json:"arsia,omitempty"`
	// RetainUntil is when the record's content may be redacted by Purge;
	// zero means kept forever.
	RetainUntil time.Time `json:"retain_until,omitzero"`
	// Redacted marks a record whose content Purge removed: only Seq, Time,
	// Kind, RetainUntil, Prev and Hash remain.
	Redacted bool `json:"redacted,omitempty"`
	// Prev is the Hash of the previous record (Genesis for seq 1).
	Prev string `json:"prev"`
	// Hash is "sha256:" + hex SHA-256 of the RFC 8785 form of the record
	// without its hash member.
	Hash string `json:"hash,omitempty"`
}

// wireRecord is Record's JSON form: times as fixed-width strings.
type wireRecord struct {
	Seq           uint64                  `json:"seq"`
	Time          string                  `json:"time"`
	Kind          Kind                    `json:"kind"`
	MessageID     string                  `json:"message_id,omitempty"`
	CorrelationID string                  `json:"correlation_id,omitempty"`
	Sender        string                  `json:"sender,omitempty"`
	Recipient     string                  `json:"recipient,omitempty"`
	Capability    string                  `json:"capability,omitempty"`
	PayloadHash   string                  `json:"payload_hash,omitempty"`
	Profile       string                  `json:"profile,omitempty"`
	Oversight     string                  `json:"oversight,omitempty"`
	Actor         Actor                   `json:"actor,omitzero"`
	Outcome       string                  `json:"outcome,omitempty"`
	ASCCode       int                     `json:"asc_code,omitempty"`
	Status        string                  `json:"status,omitempty"`
	RequestID     string                  `json:"request_id,omitempty"`
	ResolutionID  string                  `json:"resolution_id,omitempty"`
	TraceID       string                  `json:"trace_id,omitempty"`
	Details       map[string]any          `json:"details,omitempty"`
	ARSIA         *compliance.AuditRecord `json:"arsia,omitempty"`
	RetainUntil   string                  `json:"retain_until,omitempty"`
	Redacted      bool                    `json:"redacted,omitempty"`
	Prev          string                  `json:"prev"`
	Hash          string                  `json:"hash,omitempty"`
}

// ErrRecord is wrapped by every error about a record's form.
var ErrRecord = errors.New("audit: invalid record")

// FormatTime renders t in TimeLayout (UTC).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s || t.Year() < 1 || t.IsZero() {
		return time.Time{}, fmt.Errorf("time %q is not in the form %s", s, TimeLayout)
	}
	return t, nil
}

func (r *Record) wire() (wireRecord, error) {
	if r.Time.IsZero() {
		return wireRecord{}, fmt.Errorf("%w: time is missing", ErrRecord)
	}
	if y := r.Time.UTC().Year(); y < 1 || y > 9999 {
		return wireRecord{}, fmt.Errorf("%w: time %v is out of range", ErrRecord, r.Time)
	}
	w := wireRecord{
		Seq: r.Seq, Time: FormatTime(r.Time), Kind: r.Kind, MessageID: r.MessageID,
		CorrelationID: r.CorrelationID, Sender: r.Sender, Recipient: r.Recipient,
		Capability: r.Capability, PayloadHash: r.PayloadHash, Profile: r.Profile,
		Oversight: r.Oversight, Actor: r.Actor, Outcome: r.Outcome, ASCCode: r.ASCCode,
		Status: r.Status, RequestID: r.RequestID, ResolutionID: r.ResolutionID,
		TraceID: r.TraceID, Details: r.Details, ARSIA: r.ARSIA, Redacted: r.Redacted,
		Prev: r.Prev, Hash: r.Hash,
	}
	if !r.RetainUntil.IsZero() {
		if y := r.RetainUntil.UTC().Year(); y < 1 || y > 9999 {
			return wireRecord{}, fmt.Errorf("%w: retain_until %v is out of range", ErrRecord, r.RetainUntil)
		}
		w.RetainUntil = FormatTime(r.RetainUntil)
	}
	return w, nil
}

// canonical returns the RFC 8785 form of r (with its hash member when
// r.Hash is set).
func (r *Record) canonical() ([]byte, error) {
	w, err := r.wire()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	c, err := jcs.Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if len(c) > MaxRecordSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrRecord, len(c), MaxRecordSize)
	}
	return c, nil
}

// ComputeHash returns the hash r should carry: "sha256:" + hex SHA-256 of
// the RFC 8785 form of r without its hash member. r.Hash is ignored.
func (r Record) ComputeHash() (string, error) {
	r.Hash = ""
	c, err := r.canonical()
	if err != nil {
		return "", err
	}
	return jcs.DigestCanonical(c), nil
}

// MarshalJSON returns the record's RFC 8785 canonical JSON form: one line,
// members sorted, the form Export writes and backends store.
func (r Record) MarshalJSON() ([]byte, error) { return r.canonical() }

// UnmarshalJSON is ParseRecord.
func (r *Record) UnmarshalJSON(data []byte) error {
	rec, err := ParseRecord(data)
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

// ParseRecord decodes one record from its JSON form. It is strict: unknown
// members, duplicate members, times not in TimeLayout, trailing data and
// records longer than MaxRecordSize in canonical form are refused, so that a parsed record
// encodes back to the same JSON value. It does not check the hash (see
// Verify).
func ParseRecord(data []byte) (Record, error) {
	if len(data) > 4*MaxRecordSize {
		return Record{}, fmt.Errorf("%w: %d bytes, more than %d", ErrRecord, len(data), 4*MaxRecordSize)
	}
	// jcs rejects duplicate members, invalid UTF-8 and unsafe numbers,
	// which encoding/json would silently accept.
	v, err := jcs.Decode(data)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	// encoding/json matches member names case-insensitively; only the
	// exact names are accepted.
	if err := checkMembers(v); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	c, err := jcs.CanonicalizeValue(v)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if len(c) > MaxRecordSize {
		return Record{}, fmt.Errorf("%w: %d bytes in canonical form, more than %d", ErrRecord, len(c), MaxRecordSize)
	}
	return decodeWire(data)
}

// decodeWire decodes a record's JSON form, already known to be a single
// JSON object without duplicate or case-folded member names (ParseRecord
// checks that; canonical output has it by construction).
func decodeWire(data []byte) (Record, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var (
		w   wireRecord
		err error
	)
	if err := dec.Decode(&w); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, fmt.Errorf("%w: data after the record", ErrRecord)
	}
	rec := Record{
		Seq: w.Seq, Kind: w.Kind, MessageID: w.MessageID,
		CorrelationID: w.CorrelationID, Sender: w.Sender, Recipient: w.Recipient,
		Capability: w.Capability, PayloadHash: w.PayloadHash, Profile: w.Profile,
		Oversight: w.Oversight, Actor: w.Actor, Outcome: w.Outcome, ASCCode: w.ASCCode,
		Status: w.Status, RequestID: w.RequestID, ResolutionID: w.ResolutionID,
		TraceID: w.TraceID, Details: w.Details, ARSIA: w.ARSIA, Redacted: w.Redacted,
		Prev: w.Prev, Hash: w.Hash,
	}
	if rec.Time, err = parseTime(w.Time); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if w.RetainUntil != "" {
		if rec.RetainUntil, err = parseTime(w.RetainUntil); err != nil {
			return Record{}, fmt.Errorf("%w: retain_until: %v", ErrRecord, err)
		}
	}
	if len(rec.Details) == 0 {
		rec.Details = nil
	}
	return rec, nil
}

// Redact returns r as Purge leaves it: Seq, Time, Kind, RetainUntil, Prev
// and Hash kept, Redacted set, every other member emptied.
func (r Record) Redact() Record {
	return Record{Seq: r.Seq, Time: r.Time, Kind: r.Kind, RetainUntil: r.RetainUntil,
		Redacted: true, Prev: r.Prev, Hash: r.Hash}
}

// hasContent reports whether r carries anything Redact removes.
func (r *Record) hasContent() bool {
	red := r.Redact()
	red.Redacted = r.Redacted
	return !r.equalHeader(red) || r.Details != nil || r.ARSIA != nil
}

func (r *Record) equalHeader(o Record) bool {
	return r.MessageID == o.MessageID && r.CorrelationID == o.CorrelationID &&
		r.Sender == o.Sender && r.Recipient == o.Recipient && r.Capability == o.Capability &&
		r.PayloadHash == o.PayloadHash && r.Profile == o.Profile && r.Oversight == o.Oversight &&
		r.Actor == o.Actor && r.Outcome == o.Outcome && r.ASCCode == o.ASCCode &&
		r.Status == o.Status && r.RequestID == o.RequestID && r.ResolutionID == o.ResolutionID &&
		r.TraceID == o.TraceID
}

// check validates what Append requires of a sealed record.
func (r *Record) check() error {
	switch {
	case r.Seq < 1 || r.Seq > maxSeq:
		return fmt.Errorf("%w: seq %d out of range", ErrRecord, r.Seq)
	case r.Kind == "":
		return fmt.Errorf("%w: kind is missing", ErrRecord)
	case !jcs.IsDigest(r.Prev):
		return fmt.Errorf("%w: prev %q is not a sha256 digest", ErrRecord, r.Prev)
	case r.PayloadHash != "" && !jcs.IsDigest(r.PayloadHash):
		return fmt.Errorf("%w: payload_hash %q is not \"sha256:\" + 64 lower-case hex digits", ErrRecord, r.PayloadHash)
	case r.Redacted:
		return fmt.Errorf("%w: a record cannot be appended redacted", ErrRecord)
	}
	return nil
}

// PayloadHash returns the payload_hash of a JSON payload: "sha256:" + hex
// SHA-256 of its RFC 8785 canonical form.
func PayloadHash(payload []byte) (string, error) { return jcs.Digest(payload) }

// PayloadHashValue is PayloadHash for an already decoded payload
// (map[string]any and the other shapes jcs.CanonicalizeValue accepts).
func PayloadHashValue(v any) (string, error) { return jcs.DigestValue(v) }

func isDigest(s string) bool { return jcs.IsDigest(s) }

// memberNames returns the exact JSON member names of a struct type.
func memberNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	return names
}

var members = sync.OnceValue(func() [3]map[string]bool {
	return [3]map[string]bool{
		memberNames(reflect.TypeFor[wireRecord]()),
		memberNames(reflect.TypeFor[Actor]()),
		memberNames(reflect.TypeFor[compliance.AuditRecord]()),
	}
})

// checkMembers refuses member names that are not exactly the record's
// (top level, actor, arsia); the decoder checks the rest.
func checkMembers(v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return errors.New("not a JSON object")
	}
	m := members()
	check := func(where string, o map[string]any, names map[string]bool) error {
		for k := range o {
			if !names[k] {
				return fmt.Errorf("unknown member %q%s", k, where)
			}
		}
		return nil
	}
	if err := check("", obj, m[0]); err != nil {
		return err
	}
	if a, ok := obj["actor"].(map[string]any); ok {
		if err := check(" in actor", a, m[1]); err != nil {
			return err
		}
	}
	if a, ok := obj["arsia"].(map[string]any); ok {
		if err := check(" in arsia", a, m[2]); err != nil {
			return err
		}
	}
	return nil
}
