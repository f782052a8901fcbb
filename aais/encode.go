package aais

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"unicode/utf8"
)

// The wire types are written by hand rather than through encoding/json's
// reflection, which cost more than everything else in building a message.
// The output is byte for byte what encoding/json writes for the same wire
// value with HTML escaping off (TestEncodeMatchesEncodingJSON and
// FuzzEncode check that): members in struct order, omitempty strings and
// omitzero maps left out, nil slices as null, map keys sorted, raw values
// compacted, strings escaped the same way (", \, control characters,
// U+2028 and U+2029; a byte that is not UTF-8 becomes \ufffd).

// appendWireMessage appends the JSON of w.
func appendWireMessage(dst []byte, w *wireMessage) ([]byte, error) {
	var err error
	dst = append(dst, `{"aais":`...)
	dst = appendString(dst, w.AAIS)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, string(w.Type))
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, w.ID)
	dst = append(dst, `,"occurred_at":`...)
	dst = appendString(dst, w.OccurredAt)
	dst = append(dst, `,"sequence":`...)
	if dst, err = appendNumber(dst, w.Sequence); err != nil {
		return nil, err
	}
	if w.Stream != "" {
		dst = append(dst, `,"stream":`...)
		dst = appendString(dst, w.Stream)
	}
	if w.Extensions != nil {
		dst = append(dst, `,"extensions":`...)
		if dst, err = appendRawMap(dst, w.Extensions); err != nil {
			return nil, err
		}
	}
	if w.Request != nil {
		dst = append(dst, `,"request":`...)
		if dst, err = appendWireRequest(dst, w.Request); err != nil {
			return nil, err
		}
	}
	if w.Decision != nil {
		dst = append(dst, `,"decision":`...)
		if dst, err = appendWireDecision(dst, w.Decision); err != nil {
			return nil, err
		}
	}
	if w.Resolution != nil {
		dst = append(dst, `,"resolution":`...)
		if dst, err = appendWireResolution(dst, w.Resolution); err != nil {
			return nil, err
		}
	}
	if w.Snapshot != nil {
		dst = append(dst, `,"snapshot":`...)
		if dst, err = appendWireSnapshot(dst, w.Snapshot); err != nil {
			return nil, err
		}
	}
	if w.Activity != nil {
		dst = append(dst, `,"activity":`...)
		dst = appendActivity(dst, w.Activity)
	}
	return append(dst, '}'), nil
}

func appendWireRequest(dst []byte, r *wireRequest) ([]byte, error) {
	var err error
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"created_at":`...)
	dst = appendString(dst, r.CreatedAt)
	if r.ExpiresAt != "" {
		dst = append(dst, `,"expires_at":`...)
		dst = appendString(dst, r.ExpiresAt)
	}
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, r.Status)
	dst = append(dst, `,"origin":`...)
	dst = appendOrigin(dst, &r.Origin)
	dst = append(dst, `,"action":`...)
	if _, compact := compactDepth(r.Action); compact {
		// An Action is always compact, valid JSON (actionFromRaw made it
		// with json.Compact), which compacting again would not change.
		dst = append(dst, r.Action...)
	} else if dst, err = appendRaw(dst, r.Action); err != nil {
		return nil, err
	}
	dst = append(dst, `,"action_digest":`...)
	dst = appendString(dst, r.ActionDigest)
	dst = append(dst, `,"risk":{"level":`...)
	dst = appendString(dst, string(r.Risk.Level))
	dst = append(dst, `,"reasons":`...)
	dst = appendStrings(dst, r.Risk.Reasons)
	dst = append(dst, `},"choices":`...)
	if r.Choices == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range r.Choices {
			if i > 0 {
				dst = append(dst, ',')
			}
			c := &r.Choices[i]
			dst = append(dst, `{"decision":`...)
			dst = appendString(dst, string(c.Decision))
			dst = append(dst, `,"scope":`...)
			dst = appendString(dst, string(c.Scope))
			dst = append(dst, `,"label":`...)
			dst = appendString(dst, c.Label)
			if c.ScopeConstraints != nil {
				dst = append(dst, `,"scope_constraints":`...)
				if dst, err = appendRawMap(dst, c.ScopeConstraints); err != nil {
					return nil, err
				}
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if r.Extensions != nil {
		dst = append(dst, `,"extensions":`...)
		if dst, err = appendRawMap(dst, r.Extensions); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func appendOrigin(dst []byte, o *Origin) []byte {
	dst = append(dst, `{"harness":`...)
	dst = appendString(dst, o.Harness)
	dst = append(dst, `,"session_id":`...)
	dst = appendString(dst, o.SessionID)
	for _, f := range [...]struct{ name, v string }{
		{`,"run_id":`, o.RunID},
		{`,"task_id":`, o.TaskID},
		{`,"graph_id":`, o.GraphID},
		{`,"node_id":`, o.NodeID},
		{`,"agent_id":`, o.AgentID},
		{`,"profile":`, o.Profile},
		{`,"subagent_run_id":`, o.SubagentRunID},
		{`,"parent_run_id":`, o.ParentRunID},
		{`,"project":`, o.Project},
	} {
		if f.v != "" {
			dst = append(dst, f.name...)
			dst = appendString(dst, f.v)
		}
	}
	return append(dst, '}')
}

func appendWireDecision(dst []byte, d *wireDecision) ([]byte, error) {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, d.ID)
	dst = append(dst, `,"request_id":`...)
	dst = appendString(dst, d.RequestID)
	dst = append(dst, `,"action_digest":`...)
	dst = appendString(dst, d.ActionDigest)
	dst = append(dst, `,"decided_at":`...)
	dst = appendString(dst, d.DecidedAt)
	dst = append(dst, `,"decision":`...)
	dst = appendString(dst, string(d.Decision))
	dst = append(dst, `,"scope":`...)
	dst = appendString(dst, string(d.Scope))
	dst = append(dst, `,"actor":{"id":`...)
	dst = appendString(dst, d.Actor.ID)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, string(d.Actor.Type))
	if d.Actor.DisplayName != "" {
		dst = append(dst, `,"display_name":`...)
		dst = appendString(dst, d.Actor.DisplayName)
	}
	if d.Actor.AuthenticatedBy != "" {
		dst = append(dst, `,"authenticated_by":`...)
		dst = appendString(dst, d.Actor.AuthenticatedBy)
	}
	dst = append(dst, '}')
	if d.Extensions != nil {
		var err error
		dst = append(dst, `,"extensions":`...)
		if dst, err = appendRawMap(dst, d.Extensions); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func appendWireResolution(dst []byte, r *wireResolution) ([]byte, error) {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"request_id":`...)
	dst = appendString(dst, r.RequestID)
	if r.DecisionID != "" {
		dst = append(dst, `,"decision_id":`...)
		dst = appendString(dst, r.DecisionID)
	}
	dst = append(dst, `,"action_digest":`...)
	dst = appendString(dst, r.ActionDigest)
	dst = append(dst, `,"resolved_at":`...)
	dst = appendString(dst, r.ResolvedAt)
	dst = append(dst, `,"outcome":`...)
	dst = appendString(dst, string(r.Outcome))
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, r.Message)
	if r.EffectiveScope != "" {
		dst = append(dst, `,"effective_scope":`...)
		dst = appendString(dst, string(r.EffectiveScope))
	}
	if r.Extensions != nil {
		var err error
		dst = append(dst, `,"extensions":`...)
		if dst, err = appendRawMap(dst, r.Extensions); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func appendWireSnapshot(dst []byte, s *wireSnapshot) ([]byte, error) {
	var err error
	dst = append(dst, `{"as_of_sequence":`...)
	if dst, err = appendNumber(dst, s.AsOfSequence); err != nil {
		return nil, err
	}
	dst = append(dst, `,"pending":`...)
	if s.Pending == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range s.Pending {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendWireRequest(dst, &s.Pending[i]); err != nil {
				return nil, err
			}
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

func appendActivity(dst []byte, a *Activity) []byte {
	dst = append(dst, `{"request_id":`...)
	dst = appendString(dst, a.RequestID)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, a.Message)
	if a.Stage != "" {
		dst = append(dst, `,"stage":`...)
		dst = appendString(dst, a.Stage)
	}
	return append(dst, '}')
}

func appendStrings(dst []byte, list []string) []byte {
	if list == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// appendNumber writes a json.Number as encoding/json does: "" as 0, and
// anything that is not a JSON number refused.
func appendNumber(dst []byte, n json.Number) ([]byte, error) {
	if n == "" {
		return append(dst, '0'), nil
	}
	if !isJSONNumber(string(n)) {
		return nil, fmt.Errorf("json: invalid number literal %q", string(n))
	}
	return append(dst, n...), nil
}

// isJSONNumber reports whether s is a JSON number literal.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigitByte(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && isDigitByte(s[i]) {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && isDigitByte(s[i]) {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// appendRawMap writes a map of raw values with its keys sorted.
func appendRawMap[M ~map[string]json.RawMessage](dst []byte, m M) ([]byte, error) {
	var arr [8]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendRaw(dst, m[k]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendRaw writes a raw value compacted, nil as null; what is not JSON is
// refused, as encoding/json refuses it.
func appendRaw(dst []byte, v json.RawMessage) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	if isPlainScalar(v) {
		return append(dst, v...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, v); err != nil {
		return nil, &json.MarshalerError{Type: reflect.TypeFor[json.RawMessage](), Err: err}
	}
	return buf.Bytes(), nil
}

// appendString writes s as a JSON string the way encoding/json does with
// HTML escaping off.
func appendString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, `\b`...)
			case '\f':
				dst = append(dst, `\f`...)
			case '\n':
				dst = append(dst, `\n`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\t':
				dst = append(dst, `\t`...)
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// isPlainScalar reports whether v is JSON that compacting leaves as it is
// and that is obviously valid: true, false, null, an integer of plain
// digits, or a string of valid UTF-8 without escapes or control
// characters.
func isPlainScalar(v []byte) bool {
	switch s := string(v); {
	case s == "true" || s == "false" || s == "null":
		return true
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
		body := s[1 : len(s)-1]
		for i := 0; i < len(body); i++ {
			if c := body[i]; c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		return utf8.ValidString(body)
	}
	return isJSONNumber(string(v)) && !bytes.ContainsAny(v, ".eE-")
}
