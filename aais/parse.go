package aais

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/custos-runtime/custos/jcs"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultMaxSize caps a message at 4 MiB: room for a snapshot of many
	// pending requests, small enough that one request cannot exhaust a
	// presenter.
	DefaultMaxSize = 4 << 20
	// DefaultMaxDepth caps the nesting of arrays and objects, counting the
	// message itself as depth 1.
	DefaultMaxDepth = jcs.DefaultMaxDepth
)

// Options tunes parsing and building. A nil *Options means the defaults;
// the package-level functions use them.
type Options struct {
	// MaxSize caps a document in bytes. Zero means DefaultMaxSize.
	MaxSize int
	// MaxDepth caps nesting. Zero means DefaultMaxDepth.
	MaxDepth int
	// Rand is where builders read the randomness of generated ids. Nil
	// means crypto/rand.
	Rand io.Reader
}

// defaultJCS is the jcs.Options of the default limits; nothing changes it.
// Decoded documents are only ever checked and dropped here, never kept,
// so their strings may share one copy of the input.
var defaultJCS = &jcs.Options{MaxSize: DefaultMaxSize, MaxDepth: DefaultMaxDepth, ShareInput: true}

func (o *Options) jcs() *jcs.Options {
	if o == nil || (o.MaxSize <= 0 && o.MaxDepth <= 0) {
		return defaultJCS
	}
	j := *defaultJCS
	if o.MaxSize > 0 {
		j.MaxSize = o.MaxSize
	}
	if o.MaxDepth > 0 {
		j.MaxDepth = o.MaxDepth
	}
	return &j
}

// Parse reads one AAIS 1.0 message and returns it only if it is valid. It
// checks, in order and stopping at the first stage that fails:
//
//  1. strict I-JSON decoding (jcs.Decode): duplicate member names, invalid
//     UTF-8, lone surrogates, non-interoperable numbers, depth and size;
//  2. the AAIS 1.0 JSON Schema, including formats (date-time);
//  3. the semantic rules a single document can be checked against: the
//     action digest recomputed over the action exactly as received, an
//     exit choice, unique (decision, scope) pairs, expiry after creation,
//     timestamps, sequence range, and the rest listed under the Rule
//     constants.
//
// Every failure is a *ValidationError listing each issue with its JSON
// Pointer.
func Parse(data []byte) (*Message, error) {
	return (*Options)(nil).Parse(data)
}

// Parse is the package-level Parse under o's limits.
func (o *Options) Parse(data []byte) (*Message, error) {
	doc, err := o.jcs().Decode(data)
	if err != nil {
		return nil, &ValidationError{
			Issues: []Issue{{Path: jcsPath(err), Rule: RuleJSON, Message: err.Error()}},
			cause:  err,
		}
	}
	var is issues
	// A document the schema fast path finds certainly valid is read from
	// its generic values (see parsefast.go); any other goes through the
	// full schema and the wire types.
	m, ok := (*Message)(nil), false
	if fastValid(doc) {
		m, ok = fromDoc(data, doc, &is)
	}
	if !ok {
		is = issues{}
		if m, err = o.parseWire(data, doc, &is); err != nil {
			return nil, err
		}
	}
	checkMessage(&is, m)
	if err := is.err(); err != nil {
		return nil, err
	}
	return m, nil
}

// parseWire checks doc against the whole schema and decodes data into the
// wire types.
func (o *Options) parseWire(data []byte, doc any, is *issues) (*Message, error) {
	found, err := schemaIssues(doc)
	if err != nil {
		return nil, err
	}
	if len(found) > 0 {
		return nil, &ValidationError{Issues: found}
	}
	var w wireMessage
	if err := json.Unmarshal(data, &w); err != nil {
		// Unreachable for a document the schema accepted; fail closed.
		return nil, &ValidationError{Issues: []Issue{{Path: "", Rule: RuleJSON, Message: err.Error()}}}
	}
	return w.toMessage(is), nil
}

// Marshal returns m's JSON, after checking that it parses back as a valid
// message (so nothing invalid is ever emitted). The action is written as the
// raw JSON it was received or built as; other members are written from the
// fields, timestamps with their original text. HTML characters are not
// escaped.
func Marshal(m *Message) ([]byte, error) {
	return (*Options)(nil).Marshal(m)
}

// Marshal is the package-level Marshal under o's limits.
func (o *Options) Marshal(m *Message) ([]byte, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil message", ErrInvalid)
	}
	w, err := m.toWire()
	if err != nil {
		return nil, err
	}
	b, err := appendWireMessage(make([]byte, 0, 2048), w)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// What the copy path accepts, Parse accepts (see copypath.go).
	if o.fastCheck(m, len(b)) {
		return b, nil
	}
	if _, err := o.Parse(b); err != nil {
		return nil, err
	}
	return b, nil
}

// MarshalCopy is Marshal that also returns the message read back from the
// bytes it wrote: a deep, validated copy that shares nothing with m that
// either could change (the Action, which cannot be changed, may be
// shared). A store that keeps the bytes returns the copy instead of
// parsing them again. When m is certainly valid and reads back as itself,
// as messages from Parse and the builders do, the copy is made without
// parsing the bytes; it is the same message Parse would return.
func MarshalCopy(m *Message) ([]byte, *Message, error) {
	return (*Options)(nil).MarshalCopy(m)
}

// MarshalCopy is the package-level MarshalCopy under o's limits.
func (o *Options) MarshalCopy(m *Message) ([]byte, *Message, error) {
	return o.marshalCopy(m, nil)
}

// Copy is MarshalCopy without the JSON: the validated deep copy of m that
// Parse would read back from Marshal's output, or the error Marshal would
// return. A store that keeps messages rather than bytes keeps the copy.
func Copy(m *Message) (*Message, error) {
	return (*Options)(nil).Copy(m)
}

// Copy is the package-level Copy under o's limits.
func (o *Options) Copy(m *Message) (*Message, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil message", ErrInvalid)
	}
	// No JSON is needed when the copy path answers: only a bound on its
	// size.
	if n := sizeBound(m); n >= 0 {
		if c := o.fastCopy(m, n); c != nil {
			return c, nil
		}
	}
	bp := encodeBuffers.Get().(*[]byte)
	b, c, err := o.marshalCopy(m, (*bp)[:0])
	// Parse copies whatever it keeps, so nothing in c refers to b.
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		encodeBuffers.Put(bp)
	}
	return c, err
}

// encodeBuffers recycles the JSON Copy writes only to check and drop.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// marshalCopy is MarshalCopy writing the JSON into dst's spare capacity.
func (o *Options) marshalCopy(m *Message, dst []byte) ([]byte, *Message, error) {
	if m == nil {
		return nil, nil, fmt.Errorf("%w: nil message", ErrInvalid)
	}
	w, err := m.toWire()
	if err != nil {
		return nil, nil, err
	}
	if dst == nil {
		dst = make([]byte, 0, 2048)
	}
	b, err := appendWireMessage(dst, w)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// A message the package built or parsed usually reads back as itself:
	// copy it instead of parsing b (see copypath.go).
	if c := o.fastCopy(m, len(b)); c != nil {
		return b, c, nil
	}
	c, err := o.Parse(b)
	if err != nil {
		return nil, nil, err
	}
	return b, c, nil
}

// Validate reports whether m is a valid message, exactly as Parse would
// judge its JSON.
func Validate(m *Message) error {
	_, err := Marshal(m)
	return err
}

// MarshalJSON is Marshal, so a message embedded in another value is
// validated too.
func (m Message) MarshalJSON() ([]byte, error) { return Marshal(&m) }

// UnmarshalJSON is Parse, so json.Unmarshal cannot produce an unchecked
// message. Because encoding/json has already accepted the bytes with its own
// looser rules, the strict checks run again here.
func (m *Message) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	*m = *p
	return nil
}

// SetSequence returns a copy of data, the JSON of a message as Marshal or
// MarshalCopy wrote it, with the envelope's sequence replaced by seq. A
// store that numbers events inside a transaction marshals and validates
// the message before taking its write lock and only sets the number under
// it. Anything but Marshal's own output is refused (ErrInvalid).
//
// Marshal writes "aais", "type", "id", "occurred_at" and then "sequence",
// and the first three values are strings whose patterns exclude '"' and
// '\', so the first `"sequence":` member name is the envelope's.
func SetSequence(data []byte, seq uint64) ([]byte, error) {
	if seq > MaxSequence {
		return nil, fmt.Errorf("%w: sequence %d above %d", ErrInvalid, seq, uint64(MaxSequence))
	}
	const prefix = `{"aais":"1.0","type":"`
	const key = `","sequence":`
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return nil, fmt.Errorf("%w: not a message written by Marshal", ErrInvalid)
	}
	i := bytes.Index(data, []byte(key))
	if i < 0 || bytes.ContainsRune(data[len(prefix):i], '\\') {
		return nil, fmt.Errorf("%w: not a message written by Marshal", ErrInvalid)
	}
	start := i + len(key)
	end := start
	for end < len(data) && data[end] >= '0' && data[end] <= '9' {
		end++
	}
	if end == start || end == len(data) || (data[end] != ',' && data[end] != '}') {
		return nil, fmt.Errorf("%w: not a message written by Marshal", ErrInvalid)
	}
	out := make([]byte, 0, len(data)+20)
	out = append(out, data[:start]...)
	out = strconv.AppendUint(out, seq, 10)
	return append(out, data[end:]...), nil
}
