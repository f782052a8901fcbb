package aais

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/custos-runtime/custos/internal/jsonx"
)

// The wire types mirror the schema member for member. Parse decodes into
// them only after strict decoding and the JSON Schema have accepted the
// document, so every member is known, typed and exactly named (the schema
// forbids unknown members everywhere, which also defeats encoding/json's
// case-insensitive matching). Timestamps and sequences stay text here so
// that their problems are reported with a path.

type wireMessage struct {
	AAIS       string          `json:"aais"`
	Type       Type            `json:"type"`
	ID         string          `json:"id"`
	OccurredAt string          `json:"occurred_at"`
	Sequence   json.Number     `json:"sequence"`
	Stream     string          `json:"stream,omitempty"`
	Extensions Extensions      `json:"extensions,omitzero"`
	Request    *wireRequest    `json:"request,omitempty"`
	Decision   *wireDecision   `json:"decision,omitempty"`
	Resolution *wireResolution `json:"resolution,omitempty"`
	Snapshot   *wireSnapshot   `json:"snapshot,omitempty"`
	Activity   *Activity       `json:"activity,omitempty"`
}

type wireRequest struct {
	ID           string          `json:"id"`
	CreatedAt    string          `json:"created_at"`
	ExpiresAt    string          `json:"expires_at,omitempty"`
	Status       string          `json:"status"`
	Origin       Origin          `json:"origin"`
	Action       json.RawMessage `json:"action"`
	ActionDigest string          `json:"action_digest"`
	Risk         Risk            `json:"risk"`
	Choices      []Choice        `json:"choices"`
	Extensions   Extensions      `json:"extensions,omitzero"`
}

type wireDecision struct {
	ID           string     `json:"id"`
	RequestID    string     `json:"request_id"`
	ActionDigest string     `json:"action_digest"`
	DecidedAt    string     `json:"decided_at"`
	Decision     Verdict    `json:"decision"`
	Scope        Scope      `json:"scope"`
	Actor        Actor      `json:"actor"`
	Extensions   Extensions `json:"extensions,omitzero"`
}

type wireResolution struct {
	ID             string     `json:"id"`
	RequestID      string     `json:"request_id"`
	DecisionID     string     `json:"decision_id,omitempty"`
	ActionDigest   string     `json:"action_digest"`
	ResolvedAt     string     `json:"resolved_at"`
	Outcome        Outcome    `json:"outcome"`
	Message        string     `json:"message"`
	EffectiveScope Scope      `json:"effective_scope,omitempty"`
	Extensions     Extensions `json:"extensions,omitzero"`
}

type wireSnapshot struct {
	AsOfSequence json.Number   `json:"as_of_sequence"`
	Pending      []wireRequest `json:"pending"`
}

// ---- decoding (wire -> message), collecting issues ----

func (w *wireMessage) toMessage(is *issues) *Message {
	m := &Message{
		Type:       w.Type,
		ID:         w.ID,
		OccurredAt: timestampAt(is, "/occurred_at", w.OccurredAt),
		Sequence:   sequenceAt(is, "/sequence", w.Sequence),
		Stream:     w.Stream,
		Extensions: w.Extensions,
	}
	switch {
	case w.Request != nil:
		m.Request = w.Request.toRequest(is, "/request")
	case w.Decision != nil:
		m.Decision = w.Decision.toDecision(is, "/decision")
	case w.Resolution != nil:
		m.Resolution = w.Resolution.toResolution(is, "/resolution")
	case w.Snapshot != nil:
		s := &Snapshot{
			AsOfSequence: sequenceAt(is, "/snapshot/as_of_sequence", w.Snapshot.AsOfSequence),
			Pending:      make([]Request, 0, len(w.Snapshot.Pending)),
		}
		for i := range w.Snapshot.Pending {
			s.Pending = append(s.Pending, *w.Snapshot.Pending[i].toRequest(is, index("/snapshot/pending", i)))
		}
		m.Snapshot = s
	case w.Activity != nil:
		a := *w.Activity
		m.Activity = &a
	}
	return m
}

func (w *wireRequest) toRequest(is *issues, at string) *Request {
	r := &Request{
		ID:           w.ID,
		CreatedAt:    timestampAt(is, at+"/created_at", w.CreatedAt),
		Origin:       w.Origin,
		ActionDigest: w.ActionDigest,
		Risk:         w.Risk,
		Choices:      w.Choices,
		Extensions:   w.Extensions,
	}
	if w.ExpiresAt != "" {
		r.ExpiresAt = timestampAt(is, at+"/expires_at", w.ExpiresAt)
	}
	a, err := actionFromRaw(w.Action)
	if err != nil {
		is.add(at+"/action", RuleJSON, err.Error())
	}
	r.Action = a
	return r
}

func (w *wireDecision) toDecision(is *issues, at string) *Decision {
	return &Decision{
		ID:           w.ID,
		RequestID:    w.RequestID,
		ActionDigest: w.ActionDigest,
		DecidedAt:    timestampAt(is, at+"/decided_at", w.DecidedAt),
		Decision:     w.Decision,
		Scope:        w.Scope,
		Actor:        w.Actor,
		Extensions:   w.Extensions,
	}
}

func (w *wireResolution) toResolution(is *issues, at string) *Resolution {
	return &Resolution{
		ID:             w.ID,
		RequestID:      w.RequestID,
		DecisionID:     w.DecisionID,
		ActionDigest:   w.ActionDigest,
		ResolvedAt:     timestampAt(is, at+"/resolved_at", w.ResolvedAt),
		Outcome:        w.Outcome,
		Message:        w.Message,
		EffectiveScope: w.EffectiveScope,
		Extensions:     w.Extensions,
	}
}

func timestampAt(is *issues, at, s string) Timestamp {
	t, err := ParseTimestamp(s)
	if err != nil {
		is.add(at, RuleTimestamp, err.Error())
		// Keep the text so the message still says what was received.
		return Timestamp{text: s}
	}
	return t
}

// sequenceAt reads a number the schema has already found to be a
// non-negative integer (possibly written as 41.0 or 4.1e1).
func sequenceAt(is *issues, at string, n json.Number) uint64 {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f > MaxSequence {
		is.add(at, RuleSequence, fmt.Sprintf("%s is not an integer in 0..%d", n, uint64(MaxSequence)))
		return 0
	}
	return uint64(f)
}

// ---- encoding (message -> wire) ----

func (m *Message) toWire() (*wireMessage, error) {
	w := &wireMessage{
		AAIS:       Version,
		Type:       m.Type,
		ID:         m.ID,
		OccurredAt: m.OccurredAt.text,
		Sequence:   json.Number(strconv.FormatUint(m.Sequence, 10)),
		Stream:     m.Stream,
		Extensions: m.Extensions,
	}
	var set int
	if m.Request != nil {
		set++
		r, err := m.Request.toWire()
		if err != nil {
			return nil, err
		}
		w.Request = r
	}
	if m.Decision != nil {
		set++
		w.Decision = m.Decision.toWire()
	}
	if m.Resolution != nil {
		set++
		w.Resolution = m.Resolution.toWire()
	}
	if m.Snapshot != nil {
		set++
		s, err := m.Snapshot.toWire()
		if err != nil {
			return nil, err
		}
		w.Snapshot = s
	}
	if m.Activity != nil {
		set++
		a := *m.Activity
		w.Activity = &a
	}
	if set != 1 || m.Payload() == nil {
		return nil, &ValidationError{Issues: []Issue{{Path: "", Rule: RuleValue,
			Message: fmt.Sprintf("a %q message must carry exactly its own payload", m.Type)}}}
	}
	return w, nil
}

func (r *Request) toWire() (*wireRequest, error) {
	if r.Action.IsZero() {
		return nil, &ValidationError{Issues: []Issue{{Path: "/request/action", Rule: RuleValue, Message: "empty action"}}}
	}
	return &wireRequest{
		ID:           r.ID,
		CreatedAt:    r.CreatedAt.text,
		ExpiresAt:    r.ExpiresAt.text,
		Status:       StatusPending,
		Origin:       r.Origin,
		Action:       r.Action.raw,
		ActionDigest: r.ActionDigest,
		Risk:         r.Risk,
		Choices:      r.Choices,
		Extensions:   r.Extensions,
	}, nil
}

func (d *Decision) toWire() *wireDecision {
	return &wireDecision{
		ID:           d.ID,
		RequestID:    d.RequestID,
		ActionDigest: d.ActionDigest,
		DecidedAt:    d.DecidedAt.text,
		Decision:     d.Decision,
		Scope:        d.Scope,
		Actor:        d.Actor,
		Extensions:   d.Extensions,
	}
}

func (r *Resolution) toWire() *wireResolution {
	return &wireResolution{
		ID:             r.ID,
		RequestID:      r.RequestID,
		DecisionID:     r.DecisionID,
		ActionDigest:   r.ActionDigest,
		ResolvedAt:     r.ResolvedAt.text,
		Outcome:        r.Outcome,
		Message:        r.Message,
		EffectiveScope: r.EffectiveScope,
		Extensions:     r.Extensions,
	}
}

func (s *Snapshot) toWire() (*wireSnapshot, error) {
	w := &wireSnapshot{
		AsOfSequence: json.Number(strconv.FormatUint(s.AsOfSequence, 10)),
		Pending:      make([]wireRequest, 0, len(s.Pending)),
	}
	for i := range s.Pending {
		r, err := s.Pending[i].toWire()
		if err != nil {
			return nil, err
		}
		w.Pending = append(w.Pending, *r)
	}
	return w, nil
}

// MarshalJSON writes the request as it appears on the wire.
func (r Request) MarshalJSON() ([]byte, error) {
	w, err := r.toWire()
	if err != nil {
		return nil, err
	}
	return encode(w)
}

// MarshalJSON writes the decision as it appears on the wire.
func (d Decision) MarshalJSON() ([]byte, error) { return encode(d.toWire()) }

// MarshalJSON writes the resolution as it appears on the wire.
func (r Resolution) MarshalJSON() ([]byte, error) { return encode(r.toWire()) }

// MarshalJSON writes the snapshot as it appears on the wire.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	w, err := s.toWire()
	if err != nil {
		return nil, err
	}
	return encode(w)
}

// encode marshals a wire value as encoding/json does without HTML
// escaping, so "<", ">" and "&" in raw members are written as they came,
// and without the trailing newline (see encode.go).
func encode(v any) ([]byte, error) {
	dst := make([]byte, 0, 1024)
	switch w := v.(type) {
	case *wireMessage:
		return appendWireMessage(dst, w)
	case *wireRequest:
		return appendWireRequest(dst, w)
	case *wireDecision:
		return appendWireDecision(dst, w)
	case *wireResolution:
		return appendWireResolution(dst, w)
	case *wireSnapshot:
		return appendWireSnapshot(dst, w)
	}
	return encodeReflect(v)
}

// encodeReflect is encode through encoding/json, for any value.
func encodeReflect(v any) ([]byte, error) { return jsonx.Marshal(v) }

// decodeRawObject reads a JSON object into compact raw member values. A
// JSON null leaves the map nil.
func decodeRawObject(data []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, err
		}
		m[k] = buf.Bytes()
	}
	return m, nil
}
