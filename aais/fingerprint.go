package aais

import (
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
)

// The Authority fingerprints every request and decision: the JCS digest of
// the payload's JSON. Stores keep those fingerprints, so they must never
// change. Writing the JSON and then canonicalizing it parses and sorts
// every member again; the payloads' own members are few and fixed, so
// their canonical form is written here directly, in sorted order, and only
// the raw values inside (the action, constraints, extensions) go through
// jcs. TestFingerprintMatchesJCS and FuzzFingerprint check the result
// against jcs.Digest of the marshalled payload. Whatever this cannot write
// with certainty (a string that is not UTF-8, a map key beyond ASCII, a
// raw value jcs refuses, a large value) is left to that path, which also
// gives the precise error.

// fingerprint is the JCS SHA-256 digest of a payload's JSON.
func fingerprint(p interface{ MarshalJSON() ([]byte, error) }) (string, error) {
	var canon []byte
	var ok bool
	bp := encodeBuffers.Get().(*[]byte)
	switch v := p.(type) {
	case *Request:
		canon, ok = canonicalRequest((*bp)[:0], v)
	case *Decision:
		canon, ok = canonicalDecision((*bp)[:0], v)
	}
	var d string
	if ok && len(canon) <= rawBudget*4 {
		d = jcs.DigestCanonical(canon)
	}
	if cap(canon) <= 64<<10 {
		*bp = canon[:0]
		encodeBuffers.Put(bp)
	}
	if d != "" {
		return d, nil
	}
	b, err := p.MarshalJSON()
	if err != nil {
		return "", err
	}
	d, err = jcs.Digest(b)
	if err != nil {
		return "", errors.Join(ErrInvalid, err)
	}
	return d, nil
}

// rawBudget caps the raw bytes written here; beyond it, jcs.Digest's own
// size limit applies through the slow path.
const rawBudget = 1 << 20

// canonWriter writes canonical JSON, remembering whether it stayed
// certain.
type canonWriter struct {
	dst      []byte
	ok       bool
	rawBytes int // raw bytes canonicalized so far
}

// canonicalRequest appends the JCS form of r's wire JSON. Members, in
// UTF-16 order: action, action_digest, choices, created_at, expires_at,
// extensions, id, origin, risk, status.
func canonicalRequest(dst []byte, r *Request) ([]byte, bool) {
	if r.Action.IsZero() {
		return nil, false
	}
	w := canonWriter{dst: dst, ok: true}
	// The request is depth 1 in its own document, so its members' values
	// start at depth 2.
	w.lit(`{"action":`)
	w.raw(r.Action.raw, 1)
	w.lit(`,"action_digest":`)
	w.str(r.ActionDigest)
	w.lit(`,"choices":`)
	if r.Choices == nil {
		w.lit("null")
	} else {
		w.lit("[")
		for i := range r.Choices {
			c := &r.Choices[i]
			if i > 0 {
				w.lit(",")
			}
			w.lit(`{"decision":`)
			w.str(string(c.Decision))
			w.lit(`,"label":`)
			w.str(c.Label)
			w.lit(`,"scope":`)
			w.str(string(c.Scope))
			if c.ScopeConstraints != nil {
				w.lit(`,"scope_constraints":`)
				// choices array 2, choice 3, constraints 4.
				rawMap(&w, c.ScopeConstraints, 4)
			}
			w.lit("}")
		}
		w.lit("]")
	}
	w.lit(`,"created_at":`)
	w.str(r.CreatedAt.text)
	if r.ExpiresAt.text != "" {
		w.lit(`,"expires_at":`)
		w.str(r.ExpiresAt.text)
	}
	if r.Extensions != nil {
		w.lit(`,"extensions":`)
		rawMap(&w, r.Extensions, 2)
	}
	w.lit(`,"id":`)
	w.str(r.ID)
	o := &r.Origin
	w.lit(`,"origin":{`)
	first := true
	for _, f := range [...]struct {
		name, v string
		always  bool
	}{
		{"agent_id", o.AgentID, false},
		{"graph_id", o.GraphID, false},
		{"harness", o.Harness, true},
		{"node_id", o.NodeID, false},
		{"parent_run_id", o.ParentRunID, false},
		{"profile", o.Profile, false},
		{"project", o.Project, false},
		{"run_id", o.RunID, false},
		{"session_id", o.SessionID, true},
		{"subagent_run_id", o.SubagentRunID, false},
		{"task_id", o.TaskID, false},
	} {
		if f.v == "" && !f.always {
			continue
		}
		if !first {
			w.lit(",")
		}
		first = false
		w.str(f.name)
		w.lit(":")
		w.str(f.v)
	}
	w.lit(`},"risk":{"level":`)
	w.str(string(r.Risk.Level))
	w.lit(`,"reasons":`)
	if r.Risk.Reasons == nil {
		w.lit("null")
	} else {
		w.lit("[")
		for i, s := range r.Risk.Reasons {
			if i > 0 {
				w.lit(",")
			}
			w.str(s)
		}
		w.lit("]")
	}
	w.lit(`},"status":"pending"}`)
	return w.dst, w.ok
}

// canonicalDecision appends the JCS form of d's wire JSON. Members:
// action_digest, actor (authenticated_by, display_name, id, type),
// decided_at, decision, extensions, id, request_id, scope.
func canonicalDecision(dst []byte, d *Decision) ([]byte, bool) {
	w := canonWriter{dst: dst, ok: true}
	w.lit(`{"action_digest":`)
	w.str(d.ActionDigest)
	w.lit(`,"actor":{`)
	if d.Actor.AuthenticatedBy != "" {
		w.lit(`"authenticated_by":`)
		w.str(d.Actor.AuthenticatedBy)
		w.lit(",")
	}
	if d.Actor.DisplayName != "" {
		w.lit(`"display_name":`)
		w.str(d.Actor.DisplayName)
		w.lit(",")
	}
	w.lit(`"id":`)
	w.str(d.Actor.ID)
	w.lit(`,"type":`)
	w.str(string(d.Actor.Type))
	w.lit(`},"decided_at":`)
	w.str(d.DecidedAt.text)
	w.lit(`,"decision":`)
	w.str(string(d.Decision))
	if d.Extensions != nil {
		w.lit(`,"extensions":`)
		rawMap(&w, d.Extensions, 2)
	}
	w.lit(`,"id":`)
	w.str(d.ID)
	w.lit(`,"request_id":`)
	w.str(d.RequestID)
	w.lit(`,"scope":`)
	w.str(string(d.Scope))
	w.lit("}")
	return w.dst, w.ok
}

func (w *canonWriter) lit(s string) { w.dst = append(w.dst, s...) }

// str writes s as RFC 8785 writes a string: only '"', '\\' and control
// characters escaped, the short forms where JSON has them, lower-case hex
// otherwise. A string that is not UTF-8 is left to the slow path (the
// encoder would have replaced its bad bytes).
func (w *canonWriter) str(s string) {
	if !utf8.ValidString(s) {
		w.ok = false
		return
	}
	const hexDigits = "0123456789abcdef"
	w.dst = append(w.dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.dst = append(w.dst, s[start:i]...)
		switch c {
		case '"', '\\':
			w.dst = append(w.dst, '\\', c)
		case '\b':
			w.dst = append(w.dst, `\b`...)
		case '\t':
			w.dst = append(w.dst, `\t`...)
		case '\n':
			w.dst = append(w.dst, `\n`...)
		case '\f':
			w.dst = append(w.dst, `\f`...)
		case '\r':
			w.dst = append(w.dst, `\r`...)
		default:
			w.dst = append(w.dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	w.dst = append(w.dst, s[start:]...)
	w.dst = append(w.dst, '"')
}

// raw writes the canonical form of a raw value whose container is at depth
// at of the payload document, under jcs's default depth limit for the
// whole document. nil is null, as the encoder writes it.
func (w *canonWriter) raw(v []byte, at int) {
	if !w.ok {
		return
	}
	if v == nil {
		w.lit("null")
		return
	}
	w.rawBytes += len(v)
	if w.rawBytes > rawBudget || at >= jcs.DefaultMaxDepth {
		w.ok = false
		return
	}
	out, err := (&jcs.Options{MaxDepth: jcs.DefaultMaxDepth - at}).Append(w.dst, v)
	if err != nil {
		w.ok = false
		return
	}
	w.dst = out
}

// rawMap writes a map of raw values, the map at depth at; keys must be
// ASCII, where byte order is UTF-16 order.
func rawMap[M ~map[string]V, V ~[]byte](w *canonWriter, m M, at int) {
	var arr [8]string
	keys := arr[:0]
	for k := range m {
		for i := 0; i < len(k); i++ {
			if k[i] >= utf8.RuneSelf {
				w.ok = false
				return
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.lit("{")
	for i, k := range keys {
		if i > 0 {
			w.lit(",")
		}
		w.str(k)
		w.lit(":")
		w.raw(m[k], at)
	}
	w.lit("}")
}
