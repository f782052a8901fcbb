package aais

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
)

// This file lets MarshalCopy skip parsing its own output when the message
// it was given is certainly valid and reads back as exactly itself. It
// answers "certainly" (fastCopy returns a copy) or "don't know" (nil), in
// which case MarshalCopy parses the bytes it wrote, as it always did, and
// Parse alone judges and reports.
//
// Soundness is the only requirement, as for the schema fast path
// (fastpath.go), whose checkers it reuses: a copy is returned only when
// Parse would accept the bytes Marshal writes for m and would return a
// message deeply equal to that copy. TestFastCopyAgreesWithParse and
// FuzzFastCopy check exactly that against Parse.
//
// What makes a Go value read back as itself, besides being valid:
//
//   - strings are valid UTF-8 (encoding/json writes U+FFFD for a bad byte);
//   - timestamps hold the text and instant ParseTimestamp gives for the
//     text, and the text is one the schema's date-time accepts;
//   - raw members (extension and constraint values) are compact, strictly
//     valid JSON (encoding/json compacts them; Parse keeps them compact);
//   - nil and empty are distinguished the way the wire does: nil maps are
//     absent members, empty ones are {} (which scope_constraints refuses);
//   - the action is immutable and was validated against the action schema
//     by whichever of NewAction or Parse made it; its nesting depth and the
//     total size are checked here against the limits in force.
//
// It declines snapshots, activities, envelope extensions, and anything the
// checks below do not certainly accept.

// fastCopy returns a deep copy of m when m is certainly valid under o's
// limits and its JSON, at most size bytes long, parses back as exactly
// that copy; nil otherwise.
func (o *Options) fastCopy(m *Message, size int) *Message {
	if !o.fastCheck(m, size) {
		return nil
	}
	return m.clone()
}

// fastCheck reports whether fastCopy would return a copy of m.
func (o *Options) fastCheck(m *Message, size int) bool {
	if !fastPathEnabled() {
		return false
	}
	lim := o.jcs()
	if size >= lim.MaxSize {
		return false
	}
	// The envelope object is depth 1 and its payload depth 2; one level of
	// slack keeps the accounting conservative.
	c := copyLimits{maxDepth: lim.MaxDepth - 1, jcs: lim}
	if !c.envelope(m) {
		return false
	}
	var is issues
	switch m.Type {
	case TypeRequested:
		if m.Request == nil || m.Decision != nil || m.Resolution != nil || m.Snapshot != nil || m.Activity != nil ||
			!c.request(m.Request) {
			return false
		}
		checkRequest(&is, "/request", m.Request)
	case TypeDecided:
		if m.Decision == nil || m.Request != nil || m.Resolution != nil || m.Snapshot != nil || m.Activity != nil ||
			!c.decision(m.Decision) {
			return false
		}
		checkDecision(&is, "/decision", m.Decision)
	case TypeResolved:
		if m.Resolution == nil || m.Request != nil || m.Decision != nil || m.Snapshot != nil || m.Activity != nil ||
			!c.resolution(m.Resolution) {
			return false
		}
		checkResolution(&is, "/resolution", m.Resolution)
	default:
		return false
	}
	return len(is.list) == 0
}

// sizeBound returns a number of bytes Marshal's output for m cannot
// exceed, so that Copy can check the size limit without writing the JSON;
// -1 for the kinds fastCopy declines anyway. Each member is counted with
// room for its name and punctuation, each string byte as the six an
// escape can take, each raw value as itself (fastCopy only accepts compact
// ones, which are written as they are) or null.
func sizeBound(m *Message) int {
	const member = 40 // the longest member name, quoted, with ':' and ','
	str := func(s string) int { return member + 2 + 6*len(s) }
	raws := func(e map[string]json.RawMessage) int {
		n := member
		for k, v := range e {
			n += str(k) + len(v) + len("null")
		}
		return n
	}
	n := 8*member + 20 + str(m.ID) + str(m.OccurredAt.text) + str(m.Stream) + raws(m.Extensions)
	switch {
	case m.Request != nil:
		r := m.Request
		n += 16*member + str(r.ID) + str(r.CreatedAt.text) + str(r.ExpiresAt.text) + str(r.ActionDigest) +
			len(r.Action.raw) + str(string(r.Risk.Level)) + raws(r.Extensions)
		o := r.Origin
		for _, s := range [...]string{o.Harness, o.SessionID, o.RunID, o.TaskID, o.GraphID, o.NodeID, o.AgentID,
			o.Profile, o.SubagentRunID, o.ParentRunID, o.Project} {
			n += str(s)
		}
		for _, s := range r.Risk.Reasons {
			n += str(s)
		}
		for _, c := range r.Choices {
			n += 4*member + str(string(c.Decision)) + str(string(c.Scope)) + str(c.Label) + raws(c.ScopeConstraints)
		}
	case m.Decision != nil:
		d := m.Decision
		n += 8*member + str(d.ID) + str(d.RequestID) + str(d.ActionDigest) + str(d.DecidedAt.text) +
			str(string(d.Decision)) + str(string(d.Scope)) + str(d.Actor.ID) + str(string(d.Actor.Type)) +
			str(d.Actor.DisplayName) + str(d.Actor.AuthenticatedBy) + raws(d.Extensions)
	case m.Resolution != nil:
		r := m.Resolution
		n += 8*member + str(r.ID) + str(r.RequestID) + str(r.DecisionID) + str(r.ActionDigest) +
			str(r.ResolvedAt.text) + str(string(r.Outcome)) + str(r.Message) + str(string(r.EffectiveScope)) +
			raws(r.Extensions)
	default:
		return -1
	}
	return n
}

type copyLimits struct {
	maxDepth int // deepest nesting allowed, already less the slack
	jcs      *jcs.Options
}

// envelope: the base members, without extensions (declined).
func (c copyLimits) envelope(m *Message) bool {
	return m.Extensions == nil && isID(m.ID) && copyTimestamp(m.OccurredAt) &&
		m.Sequence <= MaxSequence && (m.Stream == "" || isID(m.Stream))
}

// request: $defs/request at depth 2.
func (c copyLimits) request(r *Request) bool {
	if !isID(r.ID) || !copyTimestamp(r.CreatedAt) || !isDigestPattern(r.ActionDigest) {
		return false
	}
	if r.ExpiresAt != (Timestamp{}) && !copyTimestamp(r.ExpiresAt) {
		return false
	}
	if !copyOrigin(r.Origin) || !copyRisk(r.Risk) {
		return false
	}
	// The action object is at depth 3. It was decoded strictly when it
	// was made, and checkRequest decodes it strictly again to recompute
	// its digest, so only its shape against the limits is checked here.
	if r.Action.IsZero() || !c.fits(r.Action.raw, 2) {
		return false
	}
	if len(r.Choices) < 1 || len(r.Choices) > 10 {
		return false
	}
	for i := range r.Choices {
		if !c.choice(&r.Choices[i]) {
			return false
		}
	}
	return c.extensions(r.Extensions, 3)
}

// copyOrigin: $defs/origin.
func copyOrigin(o Origin) bool {
	if !isID(o.Harness) || !isID(o.SessionID) {
		return false
	}
	for _, s := range [...]string{o.RunID, o.TaskID, o.GraphID, o.NodeID, o.AgentID, o.Profile,
		o.SubagentRunID, o.ParentRunID} {
		if s != "" && !isID(s) {
			return false
		}
	}
	return o.Project == "" || copyString(o.Project, 4096)
}

// copyRisk: $defs/risk.
func copyRisk(r Risk) bool {
	switch r.Level {
	case RiskLow, RiskMedium, RiskHigh, RiskCritical:
	default:
		return false
	}
	if len(r.Reasons) < 1 || len(r.Reasons) > 20 {
		return false
	}
	for _, s := range r.Reasons {
		if !copyString(s, 1000) {
			return false
		}
	}
	return true
}

// choice: $defs/choice at depth 4 (inside the choices array), with its
// conditionals.
func (c copyLimits) choice(ch *Choice) bool {
	if !ch.Decision.Valid() || !ch.Scope.Valid() || !copyString(ch.Label, 200) {
		return false
	}
	if ch.Decision != Approve && ch.Scope != ScopeOnce {
		return false
	}
	if ch.ScopeConstraints == nil {
		return ch.Scope == ScopeOnce
	}
	// minProperties 1; member names are free, values unconstrained.
	if len(ch.ScopeConstraints) == 0 {
		return false
	}
	for name, v := range ch.ScopeConstraints {
		// The constraints object is at depth 5, its values at 6.
		if !utf8.ValidString(name) || !c.raw(v, 5) {
			return false
		}
	}
	return true
}

// decision: $defs/decision at depth 2, with its conditional.
func (c copyLimits) decision(d *Decision) bool {
	if !isID(d.ID) || !isID(d.RequestID) || !isDigestPattern(d.ActionDigest) || !copyTimestamp(d.DecidedAt) {
		return false
	}
	if !d.Decision.Valid() || !d.Scope.Valid() || (d.Decision != Approve && d.Scope != ScopeOnce) {
		return false
	}
	if !copyActor(d.Actor) {
		return false
	}
	return c.extensions(d.Extensions, 3)
}

// copyActor: $defs/actor.
func copyActor(a Actor) bool {
	if !isID(a.ID) || (a.Type != ActorHuman && a.Type != ActorPolicy) {
		return false
	}
	return (a.DisplayName == "" || copyString(a.DisplayName, 200)) &&
		(a.AuthenticatedBy == "" || copyString(a.AuthenticatedBy, 200))
}

// resolution: $defs/resolution at depth 2.
func (c copyLimits) resolution(r *Resolution) bool {
	if !isID(r.ID) || !isID(r.RequestID) || !isDigestPattern(r.ActionDigest) || !copyTimestamp(r.ResolvedAt) {
		return false
	}
	if r.DecisionID != "" && !isID(r.DecisionID) {
		return false
	}
	if !r.Outcome.Valid() || !copyString(r.Message, 2000) {
		return false
	}
	if r.EffectiveScope != "" && !r.EffectiveScope.Valid() {
		return false
	}
	return c.extensions(r.Extensions, 3)
}

// extensions: $defs/extensions; the object sits at depth at, its values
// one deeper. Nil is the absent member.
func (c copyLimits) extensions(e Extensions, at int) bool {
	for name, v := range e {
		if !utf8.ValidString(name) || !isExtensionName(name) || !c.raw(v, at) {
			return false
		}
	}
	return true
}

// raw reports whether v is compact, strictly valid JSON that fits when the
// container holding it is at depth at.
func (c copyLimits) raw(v []byte, at int) bool {
	if !c.fits(v, at) {
		return false
	}
	// A string without escapes or a short integer needs no decoder: the
	// strict rules (UTF-8, control characters, escapes, exact integers)
	// hold for it by construction.
	if end, ok := plainValue(v, 0); ok && end == len(v) {
		return true
	}
	_, err := c.jcs.Decode(v)
	return err == nil
}

// plainValue reads the JSON value at v[i:] and returns where it ends, when
// it is plain: strings without escapes or control characters, of valid
// UTF-8; integers of at most 15 plain digits; true, false, null; and
// arrays and objects of those, objects with at most 16 members and no
// name twice. Plain JSON holds every strict rule (jcs) by construction,
// so it needs no decoder. Anything else is false: not decided here. The
// caller has checked v's nesting depth, which bounds the recursion.
func plainValue(v []byte, i int) (int, bool) {
	if i >= len(v) {
		return 0, false
	}
	switch c := v[i]; {
	case c == '"':
		return plainString(v, i)
	case c >= '0' && c <= '9':
		j := i
		for j < len(v) && isDigitByte(v[j]) {
			j++
		}
		if j-i > 15 || (c == '0' && j-i > 1) {
			return 0, false
		}
		return j, true
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(v)-i >= len(lit) && string(v[i:i+len(lit)]) == lit {
				return i + len(lit), true
			}
		}
		return 0, false
	case c == '[':
		i++
		if i < len(v) && v[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = plainValue(v, i); !ok || i >= len(v) {
				return 0, false
			}
			switch v[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '{':
		i++
		if i < len(v) && v[i] == '}' {
			return i + 1, true
		}
		var arr [16][2]int // the names so far, as offsets into v
		names := arr[:0]
		for {
			end, ok := plainString(v, i)
			if !ok || len(names) == len(arr) {
				return 0, false
			}
			name := v[i+1 : end-1]
			for _, n := range names {
				if bytes.Equal(v[n[0]:n[1]], name) {
					return 0, false
				}
			}
			names = append(names, [2]int{i + 1, end - 1})
			if end >= len(v) || v[end] != ':' {
				return 0, false
			}
			if i, ok = plainValue(v, end+1); !ok || i >= len(v) {
				return 0, false
			}
			switch v[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// plainString reads a string without escapes or control characters, of
// valid UTF-8, at v[i:], and returns where it ends.
func plainString(v []byte, i int) (int, bool) {
	if i >= len(v) || v[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(v); j++ {
		switch c := v[j]; {
		case c == '"':
			return j + 1, utf8.Valid(v[i+1 : j])
		case c < 0x20 || c == '\\':
			return 0, false
		}
	}
	return 0, false
}

// fits reports whether v is compact and within the depth limit when the
// container holding it is at depth at.
func (c copyLimits) fits(v []byte, at int) bool {
	depth, ok := compactDepth(v)
	return ok && at+depth <= c.maxDepth
}

// compactDepth returns the nesting depth of v, JSON that is yet to be
// checked (a scalar is 0, {} is 1), and false when v is empty or has
// whitespace outside strings, that is, is not compact.
func compactDepth(v []byte) (int, bool) {
	if len(v) == 0 {
		return 0, false
	}
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if inString {
			switch ch {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch ch {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		case ' ', '\t', '\n', '\r':
			return 0, false
		}
	}
	return deepest, true
}

// copyString: a required string of 1..max code points that encoding/json
// writes as it is.
func copyString(s string, max int) bool {
	return utf8.ValidString(s) && isStringLen(s, max)
}

// copyTimestamp: a present timestamp whose text both the schema's
// date-time (isDateTime) and ParseTimestamp accept, holding exactly what
// ParseTimestamp makes of that text.
func copyTimestamp(ts Timestamp) bool {
	if !isDateTime(ts.text) {
		return false
	}
	p, err := ParseTimestamp(ts.text)
	return err == nil && p == ts
}

// ---- deep copies ----

// Clone returns a deep copy of m that shares nothing either could change:
// maps, slices, payloads and raw values are copied; the Action, which
// cannot be changed, is shared. A store that keeps the messages
// MarshalCopy returned hands out clones of them, so no caller can change
// what it keeps. Clone does not validate; a nil m gives nil.
func (m *Message) Clone() *Message {
	if m == nil {
		return nil
	}
	return m.clone()
}

func (m *Message) clone() *Message {
	// One allocation holds the envelope and its payload, and one the raw
	// values of both: a copy is made on every read of a store.
	var a rawArena
	a.reserve(m)
	var c *Message
	switch {
	case m.Request != nil:
		b := &struct {
			m Message
			r Request
		}{m: *m}
		m.Request.cloneInto(&b.r, &a)
		c = &b.m
		c.Request = &b.r
	case m.Decision != nil:
		b := &struct {
			m Message
			d Decision
		}{m: *m, d: *m.Decision}
		b.d.Extensions = cloneRawMap(m.Decision.Extensions, &a)
		c = &b.m
		c.Decision = &b.d
	case m.Resolution != nil:
		b := &struct {
			m Message
			r Resolution
		}{m: *m, r: *m.Resolution}
		b.r.Extensions = cloneRawMap(m.Resolution.Extensions, &a)
		c = &b.m
		c.Resolution = &b.r
	default:
		cm := *m
		c = &cm
	}
	c.Extensions = cloneRawMap(m.Extensions, &a)
	// A malformed message may carry several payloads; copy every one.
	if m.Request != nil && c.Request == m.Request {
		c.Request = new(Request)
		m.Request.cloneInto(c.Request, &a)
	}
	if m.Decision != nil && c.Decision == m.Decision {
		d := *m.Decision
		d.Extensions = cloneRawMap(m.Decision.Extensions, &a)
		c.Decision = &d
	}
	if m.Resolution != nil && c.Resolution == m.Resolution {
		r := *m.Resolution
		r.Extensions = cloneRawMap(m.Resolution.Extensions, &a)
		c.Resolution = &r
	}
	if m.Snapshot != nil {
		s := *m.Snapshot
		if m.Snapshot.Pending != nil {
			s.Pending = make([]Request, len(m.Snapshot.Pending))
			for i := range m.Snapshot.Pending {
				m.Snapshot.Pending[i].cloneInto(&s.Pending[i], &a)
			}
		}
		c.Snapshot = &s
	}
	if m.Activity != nil {
		act := *m.Activity
		c.Activity = &act
	}
	return c
}

// cloneInto makes c a deep copy of r, its raw values cut from a.
func (r *Request) cloneInto(c *Request, a *rawArena) {
	*c = *r
	if r.Risk.Reasons != nil {
		c.Risk.Reasons = append(make([]string, 0, len(r.Risk.Reasons)), r.Risk.Reasons...)
	}
	if r.Choices != nil {
		c.Choices = make([]Choice, len(r.Choices))
		for i, ch := range r.Choices {
			ch.ScopeConstraints = cloneRawMap(ch.ScopeConstraints, a)
			c.Choices[i] = ch
		}
	}
	c.Extensions = cloneRawMap(r.Extensions, a)
}

// rawArena hands out copies of raw values from one allocation. Each copy
// has its own capacity, so appending to one never reaches the next.
type rawArena struct{ buf []byte }

// reserve makes room for every raw value of m (a hint: copy grows past it
// if needed).
func (a *rawArena) reserve(m *Message) {
	n := rawSize(m.Extensions)
	req := func(r *Request) {
		n += rawSize(r.Extensions)
		for i := range r.Choices {
			n += rawSize(r.Choices[i].ScopeConstraints)
		}
	}
	if m.Request != nil {
		req(m.Request)
	}
	if m.Decision != nil {
		n += rawSize(m.Decision.Extensions)
	}
	if m.Resolution != nil {
		n += rawSize(m.Resolution.Extensions)
	}
	if m.Snapshot != nil {
		for i := range m.Snapshot.Pending {
			req(&m.Snapshot.Pending[i])
		}
	}
	if n > 0 {
		a.buf = make([]byte, 0, n)
	}
}

func rawSize[M ~map[string]V, V ~[]byte](m M) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// copy returns a copy of v; nil stays nil and empty stays empty.
func (a *rawArena) copy(v []byte) []byte {
	if v == nil {
		return nil
	}
	if len(v) == 0 {
		return []byte{}
	}
	if cap(a.buf)-len(a.buf) < len(v) {
		return bytes.Clone(v)
	}
	start := len(a.buf)
	a.buf = append(a.buf, v...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// cloneRawMap copies a map of raw values and the values themselves, nil
// staying nil and empty staying empty.
func cloneRawMap[M ~map[string]V, V ~[]byte](m M, a *rawArena) M {
	if m == nil {
		return nil
	}
	c := make(M, len(m))
	for k, v := range m {
		c[k] = V(a.copy([]byte(v)))
	}
	return c
}
