package filestore

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/liveness"
	"github.com/custos-runtime/custos/internal/jsonx"
)

// Schema is the format the store writes (the "schema" member).
const Schema = "aais.store.v1"

const schemaPrefix = "aais.store.v"

// Extension names under which the store keeps Custos-only data in the
// document's "extensions" object.
const (
	ExtFingerprints         = "custos.dev/fingerprints"
	ExtDecisionFingerprints = "custos.dev/decision_fingerprints"
	ExtRules                = "custos.dev/rules"
	ExtByRule               = "custos.dev/by_rule"
	ExtResolvedRequests     = "custos.dev/resolved_requests"
)

var custosExtensions = []string{ExtFingerprints, ExtDecisionFingerprints, ExtRules, ExtByRule, ExtResolvedRequests}

// envelope is one stored AAIS message: the raw bytes as written and what
// the store needs from them without a full parse.
type envelope struct {
	raw        json.RawMessage
	seq        uint64
	typ        aais.Type
	id         string // request id (request.id or resolution.request_id)
	occurredAt time.Time
	timeOK     bool
}

// document is the parsed state file. A document obtained from the cache
// is shared and never modified: writers work on clone().
type document struct {
	storeID      string
	seq          uint64
	presenterSeq uint64
	compacted    uint64
	pending      map[string]*envelope
	owners       map[string]json.RawMessage
	decisions    map[string]json.RawMessage
	resolutions  map[string]*envelope
	events       []*envelope
	extensions   map[string]json.RawMessage // other libraries' extensions, kept as found
	extra        map[string]json.RawMessage // unknown top-level members, kept as found

	// Custos extensions, decoded.
	fps          map[string]string
	decisionFPs  map[string]string
	byRule       map[string]string
	resolvedReqs map[string]*envelope
	rules        []*aais.Rule
}

func newDocument(storeID string, seq uint64) *document {
	return &document{
		storeID:      storeID,
		seq:          seq,
		presenterSeq: seq,
		compacted:    seq,
		pending:      map[string]*envelope{},
		owners:       map[string]json.RawMessage{},
		decisions:    map[string]json.RawMessage{},
		resolutions:  map[string]*envelope{},
		extensions:   map[string]json.RawMessage{},
		extra:        map[string]json.RawMessage{},
		fps:          map[string]string{},
		decisionFPs:  map[string]string{},
		byRule:       map[string]string{},
		resolvedReqs: map[string]*envelope{},
	}
}

// clone returns a copy whose maps and slices may be changed; envelopes,
// raw values and rules are shared (they are never modified in place).
func (d *document) clone() *document {
	c := *d
	c.pending = maps.Clone(d.pending)
	c.owners = maps.Clone(d.owners)
	c.decisions = maps.Clone(d.decisions)
	c.resolutions = maps.Clone(d.resolutions)
	c.events = slices.Clone(d.events)
	c.extensions = maps.Clone(d.extensions)
	c.extra = maps.Clone(d.extra)
	c.fps = maps.Clone(d.fps)
	c.decisionFPs = maps.Clone(d.decisionFPs)
	c.byRule = maps.Clone(d.byRule)
	c.resolvedReqs = maps.Clone(d.resolvedReqs)
	c.rules = slices.Clone(d.rules)
	return &c
}

// versionError reports a newer schema.
type versionError struct{ schema string }

func (e *versionError) Error() string {
	return "filestore: state file schema " + strconv.Quote(e.schema) + " is newer than " + Schema
}
func (e *versionError) Unwrap() error { return ErrUnsupportedVersion }

// parseDocument decodes and checks a state file. It returns a
// *corruptError for anything that is not a valid document (the caller
// quarantines it) and a *versionError for a newer schema. The checks run
// in the order of the reference implementation, so the first failure
// names the same problem.
func parseDocument(data []byte) (*document, error) {
	if !utf8.Valid(data) {
		return nil, corrupt("the file is not valid UTF-8")
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, corrupt("the file is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, corrupt("the file is not valid JSON: data after the document")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, corrupt("the document is not a JSON object")
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, corrupt("the document is not a JSON object: %v", err)
	}
	d := newDocument("", 0)
	d.presenterSeq, d.compacted = 0, 0

	// schema
	var schema string
	if raw, ok := top["schema"]; !ok || json.Unmarshal(raw, &schema) != nil {
		return nil, corrupt("schema is missing or not a string")
	}
	if schema != Schema {
		if n, ok := strings.CutPrefix(schema, schemaPrefix); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			if v, err := strconv.ParseUint(n, 10, 64); err != nil || v > 1 {
				return nil, &versionError{schema: schema}
			}
		}
		return nil, corrupt("unrecognized schema %q", schema)
	}
	// counters
	for _, c := range []struct {
		key string
		dst *uint64
	}{{"sequence", &d.seq}, {"presenter_sequence", &d.presenterSeq}, {"compacted_through", &d.compacted}} {
		raw, ok := top[c.key]
		if !ok {
			continue
		}
		n, ok := jsonUint(raw)
		if !ok {
			return nil, corrupt("%s is not a non-negative integer", c.key)
		}
		*c.dst = n
	}
	if raw, ok := top["store_id"]; !ok || json.Unmarshal(raw, &d.storeID) != nil || d.storeID == "" {
		return nil, corrupt("store_id is missing or empty")
	}
	// containers
	objects := map[string]map[string]json.RawMessage{}
	for _, key := range []string{"pending", "owners", "decisions", "resolutions", "extensions"} {
		m := map[string]json.RawMessage{}
		if raw, ok := top[key]; ok {
			if !isObject(raw) || json.Unmarshal(raw, &m) != nil {
				return nil, corrupt("%s is not an object", key)
			}
		}
		objects[key] = m
	}
	var events []json.RawMessage
	if raw, ok := top["events"]; ok {
		if !isArray(raw) || json.Unmarshal(raw, &events) != nil {
			return nil, corrupt("events is not a list")
		}
	}
	for k, raw := range top {
		switch k {
		case "schema", "sequence", "presenter_sequence", "compacted_through", "store_id",
			"pending", "owners", "decisions", "resolutions", "extensions", "events":
		default:
			d.extra[k] = raw
		}
	}
	// entries
	for _, id := range sortedKeys(objects["pending"]) {
		e, err := parseEnvelope(objects["pending"][id], aais.TypeRequested)
		if err != nil || e.id != id {
			return nil, corrupt("pending[%q] is not an approval.requested envelope for that request%s", id, because(err))
		}
		d.pending[id] = e
	}
	for _, id := range sortedKeys(objects["decisions"]) {
		raw := objects["decisions"][id]
		if _, err := parseEnvelope(raw, ""); err != nil {
			return nil, corrupt("decisions[%q] is malformed%s", id, because(err))
		}
		d.decisions[id] = raw
	}
	for _, id := range sortedKeys(objects["resolutions"]) {
		e, err := parseEnvelope(objects["resolutions"][id], aais.TypeResolved)
		if err != nil || e.id != id {
			return nil, corrupt("resolutions[%q] is not an approval.resolved envelope for that request%s", id, because(err))
		}
		d.resolutions[id] = e
	}
	for _, id := range sortedKeys(objects["owners"]) {
		raw := objects["owners"][id]
		if _, err := parseOwner(raw); err != nil {
			return nil, corrupt("owners[%q] is malformed: %v", id, err)
		}
		d.owners[id] = raw
	}
	d.events = make([]*envelope, 0, len(events))
	for i, raw := range events {
		e, err := parseEnvelope(raw, "")
		if err == nil && e.typ != aais.TypeRequested && e.typ != aais.TypeResolved {
			err = errString("type " + strconv.Quote(string(e.typ)) + " is not a logged event")
		}
		if err != nil {
			return nil, corrupt("events[%d] is malformed%s", i, because(err))
		}
		d.events = append(d.events, e)
	}
	sort.SliceStable(d.events, func(i, j int) bool { return d.events[i].seq < d.events[j].seq })
	// extensions: ours are decoded, the rest kept as found
	for k, raw := range objects["extensions"] {
		if !slices.Contains(custosExtensions, k) {
			d.extensions[k] = raw
		}
	}
	if err := d.decodeCustos(objects["extensions"]); err != nil {
		return nil, err
	}
	return d, nil
}

type errString string

func (e errString) Error() string { return string(e) }

func because(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

func (d *document) decodeCustos(ext map[string]json.RawMessage) error {
	for _, m := range []struct {
		key string
		dst *map[string]string
	}{{ExtFingerprints, &d.fps}, {ExtDecisionFingerprints, &d.decisionFPs}, {ExtByRule, &d.byRule}} {
		if raw, ok := ext[m.key]; ok {
			v := map[string]string{}
			if !isObject(raw) || json.Unmarshal(raw, &v) != nil {
				return corrupt("extensions[%q] is not an object of strings", m.key)
			}
			*m.dst = v
		}
	}
	if raw, ok := ext[ExtResolvedRequests]; ok {
		var m map[string]json.RawMessage
		if !isObject(raw) || json.Unmarshal(raw, &m) != nil {
			return corrupt("extensions[%q] is not an object", ExtResolvedRequests)
		}
		for _, id := range sortedKeys(m) {
			e, err := parseEnvelope(m[id], aais.TypeRequested)
			if err != nil || e.id != id {
				return corrupt("extensions[%q][%q] is not an approval.requested envelope for that request%s", ExtResolvedRequests, id, because(err))
			}
			d.resolvedReqs[id] = e
		}
	}
	if raw, ok := ext[ExtRules]; ok {
		var rules []*aais.Rule
		if !isArray(raw) {
			return corrupt("extensions[%q] is not a list", ExtRules)
		}
		if err := json.Unmarshal(raw, &rules); err != nil {
			return corrupt("extensions[%q] holds a malformed rule: %v", ExtRules, err)
		}
		for i, r := range rules {
			if r == nil {
				return corrupt("extensions[%q][%d] is null", ExtRules, i)
			}
		}
		d.rules = rules
	}
	return nil
}

// envelopeHead is what the store reads from an envelope without parsing
// it fully.
type envelopeHead struct {
	Type       aais.Type       `json:"type"`
	Sequence   json.RawMessage `json:"sequence"`
	OccurredAt string          `json:"occurred_at"`
	Request    *struct {
		ID string `json:"id"`
	} `json:"request"`
	Resolution *struct {
		RequestID string `json:"request_id"`
	} `json:"resolution"`
}

// parseEnvelope checks an envelope's shape: an object with an integer
// sequence and, when want is set, that type and the request id.
func parseEnvelope(raw json.RawMessage, want aais.Type) (*envelope, error) {
	if !isObject(raw) {
		return nil, errString("not an object")
	}
	var h envelopeHead
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, err
	}
	seq, ok := jsonUint(h.Sequence)
	if !ok {
		return nil, errString("no integer sequence")
	}
	e := &envelope{raw: raw, seq: seq, typ: h.Type}
	switch h.Type {
	case aais.TypeRequested:
		if h.Request == nil || h.Request.ID == "" {
			return nil, errString("no request id")
		}
		e.id = h.Request.ID
	case aais.TypeResolved:
		if h.Resolution == nil || h.Resolution.RequestID == "" {
			return nil, errString("no resolution request_id")
		}
		e.id = h.Resolution.RequestID
	}
	if want != "" && h.Type != want {
		return nil, errString("type " + strconv.Quote(string(h.Type)) + ", want " + string(want))
	}
	if t, err := time.Parse(time.RFC3339Nano, h.OccurredAt); err == nil {
		e.occurredAt, e.timeOK = t, true
	}
	return e, nil
}

// newEnvelope wraps bytes aais.Marshal produced for m.
func newEnvelope(raw []byte, m *aais.Message, id string) *envelope {
	return &envelope{raw: raw, seq: m.Sequence, typ: m.Type, id: id, occurredAt: m.OccurredAt.Time(), timeOK: true}
}

// ownerJSON is the stored form of an owner.
type ownerJSON struct {
	PID       json.RawMessage `json:"pid"`
	StartTime *float64        `json:"process_start_time"`
	HostID    *string         `json:"host_id"`
}

// parseOwner reads an owner record: {pid, process_start_time, host_id},
// or a bare PID (a legacy owner on this host, without start time).
func parseOwner(raw json.RawMessage) (*aais.ProcessIdentity, error) {
	if pid, ok := jsonUint(raw); ok {
		if pid == 0 || pid > 1<<31 {
			return nil, errString("pid out of range")
		}
		return &aais.ProcessIdentity{PID: int(pid), HostID: liveness.HostID()}, nil
	}
	if !isObject(raw) {
		return nil, errString("not an object or a pid")
	}
	var o ownerJSON
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	pid, ok := jsonUint(o.PID)
	if !ok || pid == 0 || pid > 1<<31 {
		return nil, errString("pid is not a positive integer")
	}
	if o.HostID == nil || *o.HostID == "" {
		return nil, errString("host_id is missing or empty")
	}
	p := &aais.ProcessIdentity{PID: int(pid), HostID: *o.HostID}
	if o.StartTime != nil {
		if *o.StartTime < 0 {
			return nil, errString("negative process_start_time")
		}
		p.StartTime = *o.StartTime
	}
	return p, nil
}

func marshalOwner(p *aais.ProcessIdentity) (json.RawMessage, error) {
	o := struct {
		PID       int      `json:"pid"`
		StartTime *float64 `json:"process_start_time"`
		HostID    string   `json:"host_id"`
	}{PID: p.PID, HostID: p.HostID}
	if p.StartTime != 0 {
		st := p.StartTime
		o.StartTime = &st
	}
	return json.Marshal(o)
}

// jsonUint reads a JSON integer literal in 0..MaxSequence (no fraction,
// no exponent).
func jsonUint(raw json.RawMessage) (uint64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || strings.Trim(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > aais.MaxSequence {
		return 0, false
	}
	return n, true
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

func isArray(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '['
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// encode writes v as compact JSON without HTML escaping (raw values are
// written as found) and with map keys sorted.
func encode(v any) ([]byte, error) { return jsonx.Marshal(v) }

func rawMap(m map[string]*envelope) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for k, e := range m {
		out[k] = e.raw
	}
	return out
}

// marshal writes the document in the §11.2 layout, keys sorted.
func (d *document) marshal() ([]byte, error) {
	ext := maps.Clone(d.extensions)
	if ext == nil {
		ext = map[string]json.RawMessage{}
	}
	for _, m := range []struct {
		key string
		v   map[string]string
	}{{ExtFingerprints, d.fps}, {ExtDecisionFingerprints, d.decisionFPs}, {ExtByRule, d.byRule}} {
		if len(m.v) > 0 {
			b, err := encode(m.v)
			if err != nil {
				return nil, err
			}
			ext[m.key] = b
		}
	}
	if len(d.resolvedReqs) > 0 {
		b, err := encode(rawMap(d.resolvedReqs))
		if err != nil {
			return nil, err
		}
		ext[ExtResolvedRequests] = b
	}
	if len(d.rules) > 0 {
		b, err := encode(d.rules)
		if err != nil {
			return nil, err
		}
		ext[ExtRules] = b
	}
	events := make([]json.RawMessage, len(d.events))
	for i, e := range d.events {
		events[i] = e.raw
	}
	top := map[string]any{}
	for k, v := range d.extra {
		top[k] = v
	}
	top["schema"] = Schema
	top["store_id"] = d.storeID
	top["sequence"] = d.seq
	top["presenter_sequence"] = d.presenterSeq
	top["compacted_through"] = d.compacted
	top["pending"] = rawMap(d.pending)
	top["owners"] = nonNil(d.owners)
	top["decisions"] = nonNil(d.decisions)
	top["resolutions"] = rawMap(d.resolutions)
	top["events"] = events
	top["extensions"] = ext
	return encode(top)
}

func nonNil(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}

var hintRE = regexp.MustCompile(`"(?:sequence|presenter_sequence|as_of_sequence)"\s*:\s*(\d{1,18})`)

// sequenceHint is the largest sequence number found in damaged bytes.
func sequenceHint(data []byte) uint64 {
	var max uint64
	for _, m := range hintRE.FindAllSubmatch(data, -1) {
		if n, err := strconv.ParseUint(string(m[1]), 10, 64); err == nil && n > max {
			max = n
		}
	}
	if max > aais.MaxSequence {
		max = aais.MaxSequence
	}
	return max
}
