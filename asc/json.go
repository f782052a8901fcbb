package asc

import (
	"encoding/json"
	"slices"

	"github.com/custos-runtime/custos/internal/jsonx"
)

// Marshal encodes e compactly. Known members come first in specification
// order, then unknown members sorted by name, so the output is deterministic.
// It fails, instead of recursing forever, on a cause tree that breaks the
// limits (including pointer cycles).
func Marshal(e *Envelope) ([]byte, error) {
	if e == nil {
		return []byte("null"), nil
	}
	var w treeWalk
	w.root(e)
	return e.appendJSON(nil, &w)
}

// MarshalJSON implements json.Marshaler.
func (e *Envelope) MarshalJSON() ([]byte, error) { return Marshal(e) }

// member is one name/value pair of an object being encoded. A value that is
// already JSON is passed as json.RawMessage.
type member struct {
	name  string
	value any
	omit  bool
}

func always(name string, v any) member { return member{name: name, value: v} }

func optString[T ~string](name string, s T) member {
	return member{name: name, value: s, omit: s == ""}
}

func optInt(name string, n int64) member { return member{name: name, value: n, omit: n == 0} }

// optValue omits v when present is false.
func optValue(name string, v any, present bool) member {
	return member{name: name, value: v, omit: !present}
}

// appendObject writes a JSON object of the known members followed by extra.
// An extra member that shares a known member's name is dropped: extensions
// can never override a known member.
func appendObject(dst []byte, extra map[string]any, ms ...member) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	put := func(name string, v any) error {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		var err error
		if dst, err = appendValue(dst, name); err != nil {
			return err
		}
		dst = append(dst, ':')
		dst, err = appendValue(dst, v)
		return err
	}
	for _, m := range ms {
		if m.omit {
			continue
		}
		if err := put(m.name, m.value); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		if !slices.ContainsFunc(ms, func(m member) bool { return m.name == name }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := put(name, extra[name]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendValue encodes v without HTML escaping, so that "<" in a message
// survives a round trip unchanged.
func appendValue(dst []byte, v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return append(dst, raw...), nil
	}
	b, err := jsonx.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

func (e *Envelope) appendJSON(dst []byte, w *treeWalk) ([]byte, error) {
	var causes, conditions json.RawMessage
	var err error
	if e.Causes != nil {
		if causes, err = appendArray(e.Causes, w, (*Cause).appendJSON); err != nil {
			return nil, err
		}
	}
	if e.Conditions != nil {
		if conditions, err = appendArray(e.Conditions, w, (*Condition).appendJSON); err != nil {
			return nil, err
		}
	}
	status, err := e.Status.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return appendObject(dst, e.Extra,
		optString("spec_version", e.SpecVersion),
		always("status", json.RawMessage(status)),
		optValue("message", e.Message, e.Message != nil),
		optValue("retry", e.Retry, e.Retry != nil),
		optValue("remediation", e.Remediation, e.Remediation != nil),
		optValue("provenance", e.Provenance, e.Provenance != nil),
		optValue("confidence", e.Confidence, e.Confidence != nil),
		optValue("causes", causes, causes != nil),
		optValue("conditions", conditions, conditions != nil),
		optValue("events", e.Events, e.Events != nil),
		optValue("details", e.Details, e.Details != nil),
		optString("occurred_at", e.OccurredAt),
		optString("issuer", e.Issuer),
		optString("observed_by", e.ObservedBy),
		optString("authority", e.Authority),
		optValue("integrity", e.Integrity, e.Integrity != nil),
	)
}

func appendArray[T any](items []T, w *treeWalk, each func(*T, []byte, *treeWalk) ([]byte, error)) (json.RawMessage, error) {
	out := []byte{'['}
	for i := range items {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = each(&items[i], out, w); err != nil {
			return nil, err
		}
	}
	return append(out, ']'), nil
}

// appendNested encodes a nested envelope under the tree limits.
func appendNested(dst []byte, env *Envelope, w *treeWalk) ([]byte, error) {
	if err := w.enter(env); err != nil {
		return nil, err
	}
	defer w.leave(env)
	return env.appendJSON(dst, w)
}

func (c *Cause) appendJSON(dst []byte, w *treeWalk) ([]byte, error) {
	switch {
	case c.Envelope != nil:
		return appendNested(dst, c.Envelope, w)
	case c.Ref != nil:
		if err := w.enter(nil); err != nil {
			return nil, err
		}
		defer w.leave(nil)
		return c.Ref.appendJSON(dst)
	}
	return append(dst, "null"...), nil
}

func (c *Condition) appendJSON(dst []byte, w *treeWalk) ([]byte, error) {
	switch {
	case c.Envelope != nil:
		return appendNested(dst, c.Envelope, w)
	case c.Status != nil:
		return c.Status.appendJSON(dst)
	}
	return append(dst, "null"...), nil
}

// MarshalJSON implements json.Marshaler.
func (c Cause) MarshalJSON() ([]byte, error) {
	var w treeWalk
	return c.appendJSON(nil, &w)
}

// MarshalJSON implements json.Marshaler.
func (c Condition) MarshalJSON() ([]byte, error) {
	var w treeWalk
	return c.appendJSON(nil, &w)
}

func (r *CauseRef) appendJSON(dst []byte) ([]byte, error) {
	return appendObject(dst, r.Extra,
		optString("ref", r.Ref),
		optValue("code", r.Code, r.Code != 0),
		optString("name", r.Name),
		optString("scope", r.Scope),
	)
}

// MarshalJSON implements json.Marshaler.
func (r CauseRef) MarshalJSON() ([]byte, error) { return r.appendJSON(nil) }

func (s *Status) appendJSON(dst []byte) ([]byte, error) {
	return appendObject(dst, s.Extra,
		always("code", s.Code),
		always("name", s.Name),
		optString("kind", s.Kind),
		optString("class", s.Class),
		optString("scope", s.Scope),
		optString("phase", s.Phase),
		always("terminal", s.Terminal),
		optString("severity", s.Severity),
	)
}

// MarshalJSON implements json.Marshaler.
func (s Status) MarshalJSON() ([]byte, error) { return s.appendJSON(nil) }

// MarshalJSON implements json.Marshaler.
func (m Message) MarshalJSON() ([]byte, error) {
	return appendObject(nil, m.Extra,
		optString("user", m.User),
		optString("developer", m.Developer),
		optString("locale", m.Locale),
	)
}

// MarshalJSON implements json.Marshaler. retryable and safe are always
// written: their absence would read as false anyway, and saying so is the
// point of the contract.
func (r Retry) MarshalJSON() ([]byte, error) {
	return appendObject(nil, r.Extra,
		always("retryable", r.Retryable),
		always("safe", r.Safe),
		optInt("after_ms", r.AfterMS),
		optString("strategy", r.Strategy),
		optInt("attempt", r.Attempt),
		optInt("max_attempts", r.MaxAttempts),
		optString("deadline", r.Deadline),
		optString("idempotency_key", r.IdempotencyKey),
		optString("side_effect_state", r.SideEffectState),
		optValue("reconciliation_action", r.ReconciliationAction, r.ReconciliationAction != nil),
	)
}

// MarshalJSON implements json.Marshaler.
func (r Remediation) MarshalJSON() ([]byte, error) {
	return appendObject(nil, r.Params, always("action", r.Action))
}

// MarshalJSON implements json.Marshaler.
func (p Provenance) MarshalJSON() ([]byte, error) {
	return appendObject(nil, p.Extra,
		optString("run_id", p.RunID),
		optString("step_id", p.StepID),
		optString("agent_id", p.AgentID),
		optString("tool_call_id", p.ToolCallID),
		optString("provider_code", p.ProviderCode),
		optString("policy_id", p.PolicyID),
		optString("evaluator_id", p.EvaluatorID),
		optString("trace_id", p.TraceID),
		optString("span_id", p.SpanID),
	)
}

// MarshalJSON implements json.Marshaler.
func (c Confidence) MarshalJSON() ([]byte, error) {
	return appendObject(nil, c.Extra,
		always("metric", c.Metric),
		always("value", c.Value),
		optValue("range", c.Range, c.Range != nil),
		optValue("threshold", c.Threshold, c.Threshold != nil),
		always("method", c.Method),
		optString("evaluator_version", c.EvaluatorVersion),
		optValue("calibrated", c.Calibrated, c.Calibrated != nil),
		optString("evidence_set_id", c.EvidenceSetID),
	)
}

// MarshalJSON implements json.Marshaler.
func (r ConfidenceRange) MarshalJSON() ([]byte, error) {
	return appendObject(nil, r.Extra, always("minimum", r.Minimum), always("maximum", r.Maximum))
}

// MarshalJSON implements json.Marshaler.
func (i Integrity) MarshalJSON() ([]byte, error) {
	return appendObject(nil, i.Extra,
		optString("method", i.Method),
		optString("key_id", i.KeyID),
		always("verified", i.Verified),
	)
}

// MarshalJSON implements json.Marshaler.
func (e Event) MarshalJSON() ([]byte, error) {
	return appendObject(nil, e.Extra,
		always("code", e.Code),
		always("name", e.Name),
		optString("kind", e.Kind),
		optString("scope", e.Scope),
		optString("occurred_at", e.OccurredAt),
	)
}
