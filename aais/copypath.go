package aais

import (
	"bytes"
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
// limits and its JSON, size bytes long, parses back as exactly that copy;
// nil otherwise.
func (o *Options) fastCopy(m *Message, size int) *Message {
	if !fastPathEnabled() {
		return nil
	}
	lim := o.jcs()
	if size >= lim.MaxSize {
		return nil
	}
	// The envelope object is depth 1 and its payload depth 2; one level of
	// slack keeps the accounting conservative.
	c := copyLimits{maxDepth: lim.MaxDepth - 1, jcs: lim}
	if !c.envelope(m) {
		return nil
	}
	var is issues
	switch m.Type {
	case TypeRequested:
		if m.Request == nil || m.Decision != nil || m.Resolution != nil || m.Snapshot != nil || m.Activity != nil ||
			!c.request(m.Request) {
			return nil
		}
		checkRequest(&is, "/request", m.Request)
	case TypeDecided:
		if m.Decision == nil || m.Request != nil || m.Resolution != nil || m.Snapshot != nil || m.Activity != nil ||
			!c.decision(m.Decision) {
			return nil
		}
		checkDecision(&is, "/decision", m.Decision)
	case TypeResolved:
		if m.Resolution == nil || m.Request != nil || m.Decision != nil || m.Snapshot != nil || m.Activity != nil ||
			!c.resolution(m.Resolution) {
			return nil
		}
		checkResolution(&is, "/resolution", m.Resolution)
	default:
		return nil
	}
	if len(is.list) > 0 {
		return nil
	}
	return m.clone()
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
	if isPlainScalar(v) && (v[0] == '"' || len(v) <= 15) {
		return true
	}
	_, err := c.jcs.Decode(v)
	return err == nil
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
	c := *m
	c.Extensions = m.Extensions.clone()
	if m.Request != nil {
		c.Request = m.Request.clone()
	}
	if m.Decision != nil {
		d := *m.Decision
		d.Extensions = m.Decision.Extensions.clone()
		c.Decision = &d
	}
	if m.Resolution != nil {
		r := *m.Resolution
		r.Extensions = m.Resolution.Extensions.clone()
		c.Resolution = &r
	}
	if m.Snapshot != nil {
		s := *m.Snapshot
		if m.Snapshot.Pending != nil {
			s.Pending = make([]Request, len(m.Snapshot.Pending))
			for i := range m.Snapshot.Pending {
				s.Pending[i] = *m.Snapshot.Pending[i].clone()
			}
		}
		c.Snapshot = &s
	}
	if m.Activity != nil {
		a := *m.Activity
		c.Activity = &a
	}
	return &c
}

func (r *Request) clone() *Request {
	c := *r
	if r.Risk.Reasons != nil {
		c.Risk.Reasons = append(make([]string, 0, len(r.Risk.Reasons)), r.Risk.Reasons...)
	}
	if r.Choices != nil {
		c.Choices = make([]Choice, len(r.Choices))
		for i, ch := range r.Choices {
			ch.ScopeConstraints = ch.ScopeConstraints.clone()
			c.Choices[i] = ch
		}
	}
	c.Extensions = r.Extensions.clone()
	return &c
}

func (e Extensions) clone() Extensions {
	return Extensions(cloneRawMap(e))
}

func (c Constraints) clone() Constraints {
	return Constraints(cloneRawMap(c))
}

// cloneRawMap copies a map of raw values and the values themselves, nil
// staying nil and empty staying empty.
func cloneRawMap[M ~map[string]V, V ~[]byte](m M) M {
	if m == nil {
		return nil
	}
	c := make(M, len(m))
	for k, v := range m {
		if v != nil {
			v = V(bytes.Clone([]byte(v)))
		}
		c[k] = v
	}
	return c
}
