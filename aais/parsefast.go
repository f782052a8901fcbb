package aais

import (
	"bytes"
	"encoding/json"
)

// Parse decodes a document twice: strictly into generic values (jcs), to
// check it, and then again with encoding/json into the wire types, which
// cost as much as everything else together. When the schema fast path has
// already found the document certainly valid, every member's type is
// known, so fromDoc builds the message from the generic values instead,
// reading only the raw members (the action, constraints and extensions)
// from the bytes, where they are kept as received. It returns exactly what
// the wire types would give (TestFromDocMatchesWire and FuzzFromDoc
// compare the two) or false, and then Parse decodes the wire types as it
// always did. Snapshots and activities are left to that path.

// fromDoc builds the message of data, whose strict decoding is doc, into
// is; ok is false when it does not answer.
func fromDoc(data []byte, doc any, is *issues) (*Message, bool) {
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	top, ok := rawMembers(data, skipSpace(data, 0))
	if !ok {
		return nil, false
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	seq, ok := root["sequence"].(json.Number)
	if !ok {
		return nil, false
	}
	m := &Message{
		Type:       Type(str(root, "type")),
		ID:         str(root, "id"),
		OccurredAt: timestampAt(is, "/occurred_at", str(root, "occurred_at")),
		Sequence:   sequenceAt(is, "/sequence", seq),
		Stream:     str(root, "stream"),
	}
	if m.Extensions, ok = rawMapAt(data, top, "extensions"); !ok {
		return nil, false
	}
	switch m.Type {
	case TypeRequested:
		r, _ := root["request"].(map[string]any)
		span, found := top["request"]
		if r == nil || !found {
			return nil, false
		}
		req, ok := requestFromDoc(data, span, r, is)
		if !ok {
			return nil, false
		}
		m.Request = req
	case TypeDecided:
		d, _ := root["decision"].(map[string]any)
		span, found := top["decision"]
		if d == nil || !found {
			return nil, false
		}
		a, _ := d["actor"].(map[string]any)
		if a == nil {
			return nil, false
		}
		members, ok := rawMembers(data, span[0])
		if !ok {
			return nil, false
		}
		dec := &Decision{
			ID:           str(d, "id"),
			RequestID:    str(d, "request_id"),
			ActionDigest: str(d, "action_digest"),
			DecidedAt:    timestampAt(is, "/decision/decided_at", str(d, "decided_at")),
			Decision:     Verdict(str(d, "decision")),
			Scope:        Scope(str(d, "scope")),
			Actor: Actor{ID: str(a, "id"), Type: ActorType(str(a, "type")), DisplayName: str(a, "display_name"),
				AuthenticatedBy: str(a, "authenticated_by")},
		}
		if dec.Extensions, ok = rawMapAt(data, members, "extensions"); !ok {
			return nil, false
		}
		m.Decision = dec
	case TypeResolved:
		r, _ := root["resolution"].(map[string]any)
		span, found := top["resolution"]
		if r == nil || !found {
			return nil, false
		}
		members, ok := rawMembers(data, span[0])
		if !ok {
			return nil, false
		}
		res := &Resolution{
			ID:             str(r, "id"),
			RequestID:      str(r, "request_id"),
			DecisionID:     str(r, "decision_id"),
			ActionDigest:   str(r, "action_digest"),
			ResolvedAt:     timestampAt(is, "/resolution/resolved_at", str(r, "resolved_at")),
			Outcome:        Outcome(str(r, "outcome")),
			Message:        str(r, "message"),
			EffectiveScope: Scope(str(r, "effective_scope")),
		}
		if res.Extensions, ok = rawMapAt(data, members, "extensions"); !ok {
			return nil, false
		}
		m.Resolution = res
	default:
		return nil, false
	}
	return m, true
}

func requestFromDoc(data []byte, span [2]int, r map[string]any, is *issues) (*Request, bool) {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	members, ok := rawMembers(data, span[0])
	if !ok {
		return nil, false
	}
	o, _ := r["origin"].(map[string]any)
	risk, _ := r["risk"].(map[string]any)
	reasons, _ := risk["reasons"].([]any)
	choices, _ := r["choices"].([]any)
	act, found := members["action"]
	if o == nil || risk == nil || reasons == nil || choices == nil || !found {
		return nil, false
	}
	req := &Request{
		ID:        str(r, "id"),
		CreatedAt: timestampAt(is, "/request/created_at", str(r, "created_at")),
		Origin: Origin{Harness: str(o, "harness"), SessionID: str(o, "session_id"), RunID: str(o, "run_id"),
			TaskID: str(o, "task_id"), GraphID: str(o, "graph_id"), NodeID: str(o, "node_id"),
			AgentID: str(o, "agent_id"), Profile: str(o, "profile"), SubagentRunID: str(o, "subagent_run_id"),
			ParentRunID: str(o, "parent_run_id"), Project: str(o, "project")},
		ActionDigest: str(r, "action_digest"),
		Risk:         Risk{Level: RiskLevel(str(risk, "level")), Reasons: make([]string, len(reasons))},
		Choices:      make([]Choice, len(choices)),
	}
	if s := str(r, "expires_at"); s != "" {
		req.ExpiresAt = timestampAt(is, "/request/expires_at", s)
	}
	for i, v := range reasons {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		req.Risk.Reasons[i] = s
	}
	choiceSpans, ok := rawElements(data, members["choices"][0])
	if !ok || len(choiceSpans) != len(choices) {
		return nil, false
	}
	for i, v := range choices {
		c, _ := v.(map[string]any)
		if c == nil {
			return nil, false
		}
		cm, ok := rawMembers(data, choiceSpans[i][0])
		if !ok {
			return nil, false
		}
		sc, ok := rawMapAt(data, cm, "scope_constraints")
		if !ok {
			return nil, false
		}
		req.Choices[i] = Choice{Decision: Verdict(str(c, "decision")), Scope: Scope(str(c, "scope")),
			Label: str(c, "label"), ScopeConstraints: Constraints(sc)}
	}
	if req.Extensions, ok = rawMapAt(data, members, "extensions"); !ok {
		return nil, false
	}
	a, err := actionFromRaw(data[act[0]:act[1]])
	if err != nil {
		is.add("/request/action", RuleJSON, err.Error())
	}
	req.Action = a
	return req, true
}

// rawMapAt returns the object member name of members as a map of compact
// raw values, nil when absent, as decodeRawObject would.
func rawMapAt(data []byte, members map[string][2]int, name string) (map[string]json.RawMessage, bool) {
	span, found := members[name]
	if !found {
		return nil, true
	}
	inner, ok := rawMembers(data, span[0])
	if !ok {
		return nil, false
	}
	out := make(map[string]json.RawMessage, len(inner))
	for k, s := range inner {
		v := data[s[0]:s[1]]
		if _, compact := compactDepth(v); compact {
			out[k] = bytes.Clone(v)
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, false
		}
		out[k] = buf.Bytes()
	}
	return out, true
}

// The scanners below read JSON that strict decoding has already accepted,
// so they only find where things are; anything unexpected is false.

// rawMembers returns the value spans of the object starting at data[i],
// by decoded member name.
func rawMembers(data []byte, i int) (map[string][2]int, bool) {
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	out := map[string][2]int{}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return out, true
	}
	for {
		end, ok := skipString(data, i)
		if !ok {
			return nil, false
		}
		name, ok := memberName(data[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		start := skipSpace(data, i+1)
		if end, ok = skipValue(data, start); !ok {
			return nil, false
		}
		out[name] = [2]int{start, end}
		i = skipSpace(data, end)
		if i >= len(data) {
			return nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return out, true
		default:
			return nil, false
		}
	}
}

// rawElements returns the value spans of the array starting at data[i].
func rawElements(data []byte, i int) ([][2]int, bool) {
	if i >= len(data) || data[i] != '[' {
		return nil, false
	}
	var out [][2]int
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return out, true
	}
	for {
		end, ok := skipValue(data, i)
		if !ok {
			return nil, false
		}
		out = append(out, [2]int{i, end})
		i = skipSpace(data, end)
		if i >= len(data) {
			return nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return out, true
		default:
			return nil, false
		}
	}
}

// memberName decodes a quoted member name.
func memberName(quoted []byte) (string, bool) {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1]), true
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return "", false
	}
	return s, true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string starting at data[i].
func skipString(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the end of the value starting at data[i].
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, ok := skipString(data, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, j > i
		}
		j++
	}
	return j, j > i
}
