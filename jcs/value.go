package jcs

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Decode decodes data strictly into the generic shapes: map[string]any,
// []any, string, json.Number (the literal as written, so no precision is lost
// before canonicalization), bool and nil.
func Decode(data []byte) (any, error) {
	return (*Options)(nil).Decode(data)
}

// Decode is the package-level Decode under o's limits.
func (o *Options) Decode(data []byte) (any, error) {
	maxDepth, maxSize := o.limits()
	if err := checkSize(data, maxSize); err != nil {
		return nil, err
	}
	d := decoders.Get().(*decoder)
	defer d.release()
	v, err := d.document(o, data, maxDepth, "")
	if err != nil {
		return nil, err
	}
	return v, nil
}

// document decodes data with d. With omit set it also keeps track of
// whether data is its own canonical form and where the top-level member
// omit lies (see DecodeCanonical).
func (d *decoder) document(o *Options, data []byte, maxDepth int, omit string) (any, *Error) {
	d.scanner = scanner{data: data, maxDepth: maxDepth}
	if o != nil && o.Strings != nil {
		d.names = o.Strings.m
		d.shared = true
		d.table = o.Strings
	}
	if o != nil && o.ShareInput {
		d.src = string(data)
		d.retain = true
	}
	d.omit, d.omitStart, d.omitEnd, d.rootMembers = omit, -1, -1, 0
	d.canonical = true
	d.space()
	v, err := d.value(0)
	if err == nil {
		d.space()
		if d.pos != len(d.data) {
			err = d.fail(ErrSyntax, "data after the top-level value")
		}
	}
	if err != nil {
		return nil, err.finish()
	}
	return v, nil
}

// space skips white space, which no canonical document contains.
func (d *decoder) space() {
	at := d.pos
	d.skipSpace()
	if d.pos != at {
		d.canonical = false
	}
}

// decoders recycles the stacks of decoders between documents.
var decoders = sync.Pool{New: func() any {
	return &decoder{elems: make([]any, 0, 64), pairs: make([]pair, 0, 64)}
}}

// release returns d to the pool without references into the document.
func (d *decoder) release() {
	d.scanner = scanner{}
	// Every array and object clears its part of the stacks as it closes,
	// on errors too, so only what is still open needs clearing: nothing,
	// after a whole document. Clearing to capacity instead would cost a
	// 1 KB document the high-water mark of every larger one before it.
	clear(d.elems)
	clear(d.pairs)
	d.elems, d.pairs = d.elems[:0], d.pairs[:0]
	d.names, d.shared, d.table = nil, false, nil
	d.src, d.retain, d.omit = "", false, ""
	if cap(d.scratch) > 1<<12 {
		d.scratch = nil
	}
	if cap(d.elems) <= 1<<14 && cap(d.pairs) <= 1<<14 {
		decoders.Put(d)
	}
}

// decoder builds generic values. Arrays and objects are collected on stacks
// shared by all open containers and allocated once at their exact size, and
// member names are interned per document, so decoding the typical envelope
// costs little more than its strings and numbers.
type decoder struct {
	scanner
	elems []any
	pairs []pair
	// names interns member names: the caller's StringTable (read-only,
	// shared; also consulted for string values) or a cache of this
	// document's names.
	names  map[string]string
	shared bool
	table  *StringTable
	// src is a string copy of the input when Options.ShareInput is set
	// (retain): unescaped strings and numbers are then slices of it.
	src    string
	retain bool
	// canonical stays true while the input read so far is its own RFC
	// 8785 canonical form: no white space, members in order, strings and
	// numbers written as the canonicalizer writes them.
	canonical bool
	// omit is the top-level member DecodeCanonical leaves out; omitStart
	// and omitEnd are its bytes in the input, from the name's opening quote
	// to the end of its value (-1 when absent), and omitIndex its position
	// among the rootMembers members of the top-level object.
	omit                   string
	omitStart, omitEnd     int
	omitIndex, rootMembers int
	scratch                []byte
}

type pair struct {
	name  string
	value any
}

// maxInterned bounds the per-document name cache; names beyond it are
// simply not shared.
const maxInterned = 256

// smallObject is the member count up to which duplicates are found by a
// linear scan; larger objects use their map.
const smallObject = 16

func (d *decoder) value(depth int) (any, *Error) {
	switch ch := d.peek(); {
	case ch == '{':
		return d.object(depth + 1)
	case ch == '[':
		return d.array(depth + 1)
	case ch == '"':
		return d.str()
	case ch >= '0' && ch <= '9' && d.pos+1 < len(d.data) && !isNumberByte(d.data[d.pos+1]):
		// A one-digit integer, the commonest number: shared, not boxed.
		d.pos++
		return smallInts[ch-'0'], nil
	case ch == '-' || ('0' <= ch && ch <= '9'):
		start := d.pos
		lit, isInt, err := d.numberToken()
		if err != nil {
			return nil, err
		}
		// Integer literals of up to 15 digits are always interoperable,
		// and canonical as written except for "-0".
		if !isInt || len(lit) > 15 {
			f, why := parseNumber(lit, isInt)
			if why != "" {
				return nil, &Error{Err: ErrNumber, Offset: start, Detail: string(lit) + ": " + why}
			}
			if d.canonical {
				var buf [32]byte
				c, _ := AppendNumber(buf[:0], f)
				d.canonical = string(c) == string(lit)
			}
		} else if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			d.canonical = false
		}
		if d.retain {
			return json.Number(d.src[start:d.pos]), nil
		}
		return json.Number(lit), nil
	}
	lit, err := d.literal()
	switch lit {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return nil, err
}

// smallInts are the one-digit integers as decoded values.
var smallInts = [10]any{json.Number("0"), json.Number("1"), json.Number("2"), json.Number("3"),
	json.Number("4"), json.Number("5"), json.Number("6"), json.Number("7"), json.Number("8"), json.Number("9")}

// isNumberByte reports a byte that can continue a number literal.
func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// str reads a string value.
func (d *decoder) str() (any, *Error) {
	raw, escaped, err := d.stringToken()
	if err != nil {
		return nil, err
	}
	if escaped {
		s, err := d.unescaped(raw)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if d.table != nil {
		if v, ok := d.table.value(raw); ok {
			return v, nil
		}
	}
	if d.retain {
		return d.src[d.pos-1-len(raw) : d.pos-1], nil
	}
	return string(raw), nil
}

// unescaped decodes a string body with escapes and notes whether the
// escapes are the ones the canonicalizer writes.
func (d *decoder) unescaped(raw []byte) (string, *Error) {
	b, err := d.unescape(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return "", err
	}
	if d.canonical {
		d.scratch = appendString(d.scratch[:0], b)
		d.canonical = string(d.scratch[1:len(d.scratch)-1]) == string(raw)
	}
	return string(b), nil
}

// name reads a member name, sharing the string with earlier equal names.
func (d *decoder) name() (string, *Error) {
	raw, escaped, err := d.stringToken()
	if err != nil {
		return "", err
	}
	if escaped {
		return d.unescaped(raw)
	}
	if d.retain {
		return d.src[d.pos-1-len(raw) : d.pos-1], nil
	}
	if s, ok := d.names[string(raw)]; ok {
		return s, nil
	}
	s := string(raw)
	if d.shared {
		return s, nil
	}
	if d.names == nil {
		d.names = make(map[string]string, 32)
	}
	if len(d.names) < maxInterned {
		d.names[s] = s
	}
	return s, nil
}

func (d *decoder) array(depth int) (any, *Error) {
	if depth > d.maxDepth {
		return nil, d.fail(ErrDepth, "more than "+strconv.Itoa(d.maxDepth)+" nested containers")
	}
	d.pos++
	d.space()
	if d.peek() == ']' {
		d.pos++
		return []any{}, nil
	}
	base := len(d.elems)
	for i := 0; ; i++ {
		d.space()
		v, err := d.value(depth)
		if err != nil {
			clear(d.elems[base:])
			d.elems = d.elems[:base]
			return nil, err.within(strconv.Itoa(i))
		}
		d.elems = append(d.elems, v)
		d.space()
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			out := make([]any, len(d.elems)-base)
			copy(out, d.elems[base:])
			clear(d.elems[base:])
			d.elems = d.elems[:base]
			return out, nil
		default:
			clear(d.elems[base:])
			d.elems = d.elems[:base]
			return nil, d.unexpected("',' or ']'").within(strconv.Itoa(i))
		}
	}
}

func (d *decoder) object(depth int) (any, *Error) {
	if depth > d.maxDepth {
		return nil, d.fail(ErrDepth, "more than "+strconv.Itoa(d.maxDepth)+" nested containers")
	}
	d.pos++
	d.space()
	if d.peek() == '}' {
		d.pos++
		return map[string]any{}, nil
	}
	base := len(d.pairs)
	out, err := d.members(depth, base)
	clear(d.pairs[base:])
	d.pairs = d.pairs[:base]
	if err != nil {
		return nil, err
	}
	return out, nil
}

// members reads an object's members onto the pair stack above base and
// returns the object. Small objects are checked for duplicate names by a
// linear scan and get their map at the end, at its exact size; a large one
// switches to its map as soon as it outgrows the scan.
func (d *decoder) members(depth, base int) (map[string]any, *Error) {
	var big map[string]any
	var prev string
	for i := 0; ; i++ {
		d.space()
		if d.peek() != '"' {
			return nil, d.unexpected("a member name")
		}
		nameAt := d.pos
		name, err := d.name()
		if err != nil {
			return nil, err
		}
		if d.canonical && i > 0 {
			// Canonical members are in strictly increasing order.
			d.canonical = compareUTF16(prev, name) < 0
		}
		prev = name
		// Names so far in strictly increasing order cannot repeat.
		dup := false
		switch {
		case d.canonical:
		case big != nil:
			_, dup = big[name]
		default:
			for _, p := range d.pairs[base:] {
				if p.name == name {
					dup = true
					break
				}
			}
		}
		if dup {
			return nil, (&Error{Err: ErrDuplicateKey, Offset: nameAt, Detail: strconv.Quote(name)}).within(name)
		}
		d.space()
		if d.peek() != ':' {
			return nil, d.unexpected("':'").within(name)
		}
		d.pos++
		d.space()
		v, err := d.value(depth)
		if err != nil {
			return nil, err.within(name)
		}
		if depth == 1 {
			d.rootMembers++
			if d.omit != "" && name == d.omit {
				d.omitStart, d.omitEnd, d.omitIndex = nameAt, d.pos, i
			}
		}
		if big != nil {
			big[name] = v
		} else {
			d.pairs = append(d.pairs, pair{name, v})
			if len(d.pairs)-base > smallObject {
				big = make(map[string]any, 2*smallObject)
				for _, p := range d.pairs[base:] {
					big[p.name] = p.value
				}
			}
		}
		d.space()
		switch d.peek() {
		case ',':
			d.pos++
			continue
		case '}':
			d.pos++
		default:
			return nil, d.unexpected("',' or '}'").within(name)
		}
		if big != nil {
			return big, nil
		}
		out := make(map[string]any, len(d.pairs)-base)
		for _, p := range d.pairs[base:] {
			out[p.name] = p.value
		}
		return out, nil
	}
}

// CanonicalizeValue returns the canonical form of an already decoded value.
// See the package documentation for the accepted types.
func CanonicalizeValue(v any) ([]byte, error) {
	return (*Options)(nil).AppendValue(nil, v)
}

// DigestValue is Digest for an already decoded value.
func DigestValue(v any) (string, error) {
	c, err := CanonicalizeValue(v)
	if err != nil {
		return "", err
	}
	return DigestCanonical(c), nil
}

// AppendValue appends the canonical form of v to dst under o's depth limit.
func (o *Options) AppendValue(dst []byte, v any) ([]byte, error) {
	out, _, err := o.appendValue(dst, v, false)
	return out, err
}

// AppendValueCopy is AppendValue that also returns a deep copy of v made in
// the same walk: what a signer or verifier hashed and what it keeps are then
// the same value, whatever the caller does to v afterwards. Maps and slices
// are copied; strings, numbers and json.RawMessage values are shared, as
// they are immutable in practice (a RawMessage is copied).
func (o *Options) AppendValueCopy(dst []byte, v any) ([]byte, any, error) {
	return o.appendValue(dst, v, true)
}

func (o *Options) appendValue(dst []byte, v any, copying bool) ([]byte, any, error) {
	maxDepth, _ := o.limits()
	stack := memberStacks.Get().(*[]pair)
	w := valueWriter{opts: o, maxDepth: maxDepth, out: dst, copying: copying, members: (*stack)[:0]}
	start := len(dst)
	c, err := w.value(v, 0)
	if cap(w.members) <= 1<<14 {
		*stack = w.members[:0]
		memberStacks.Put(stack)
	}
	if err != nil {
		return dst[:start], nil, err.finish()
	}
	return w.out, c, nil
}

// memberStacks recycles the member stacks of valueWriters; entries are
// cleared as objects close, so a pooled stack holds no references.
var memberStacks = sync.Pool{New: func() any { s := make([]pair, 0, 64); return &s }}

type valueWriter struct {
	opts     *Options
	maxDepth int
	out      []byte
	members  []pair // members of the open maps, as a stack
	copying  bool   // value also returns a deep copy
}

func (w *valueWriter) fail(err error, detail string) *Error {
	return &Error{Err: err, Offset: -1, Detail: detail}
}

// value writes v and, when copying, returns its copy (scalars as they are).
func (w *valueWriter) value(v any, depth int) (any, *Error) {
	switch x := v.(type) {
	case nil:
		w.out = append(w.out, "null"...)
	case bool:
		w.out = strconv.AppendBool(w.out, x)
	case string:
		if !utf8.ValidString(x) {
			return nil, w.fail(ErrInvalidUTF8, "string value")
		}
		w.out = appendString(w.out, x)
	case float64:
		return v, w.float(x)
	case float32:
		return v, w.float(float64(x))
	case int:
		return v, w.integer(int64(x))
	case int8:
		return v, w.integer(int64(x))
	case int16:
		return v, w.integer(int64(x))
	case int32:
		return v, w.integer(int64(x))
	case int64:
		return v, w.integer(x)
	case uint:
		return v, w.unsigned(uint64(x))
	case uint8:
		return v, w.unsigned(uint64(x))
	case uint16:
		return v, w.unsigned(uint64(x))
	case uint32:
		return v, w.unsigned(uint64(x))
	case uint64:
		return v, w.unsigned(x)
	case json.Number:
		if isShortInteger(x) {
			// As written is canonical, as for literals in documents.
			w.out = append(w.out, x...)
			return v, nil
		}
		s := scanner{data: []byte(x)}
		lit, isInt, err := s.numberToken()
		if err != nil || s.pos != len(s.data) {
			return nil, w.fail(ErrSyntax, "json.Number "+strconv.Quote(string(x))+" is not a JSON number")
		}
		f, why := parseNumber(lit, isInt)
		if why != "" {
			return nil, w.fail(ErrNumber, string(x)+": "+why)
		}
		return v, w.float(f)
	case json.RawMessage:
		_, maxSize := w.opts.limits()
		out, err := appendCanonical(w.out, x, w.maxDepth-depth, maxSize)
		if err != nil {
			err.Offset = -1 // offsets inside a fragment mislead
			return nil, err
		}
		w.out = out
		if w.copying {
			return slices.Clone(x), nil
		}
	case []any:
		return w.array(x, depth)
	case map[string]any:
		return w.object(x, depth)
	default:
		return nil, w.fail(ErrUnsupportedType, fmt.Sprintf("%T (decode into generic values or pass json.RawMessage)", v))
	}
	return v, nil
}

func (w *valueWriter) array(a []any, depth int) (any, *Error) {
	if depth+1 > w.maxDepth {
		return nil, w.fail(ErrDepth, "more than "+strconv.Itoa(w.maxDepth)+" nested containers")
	}
	var cp []any
	if w.copying {
		cp = make([]any, len(a))
	}
	w.out = append(w.out, '[')
	for i, e := range a {
		if i > 0 {
			w.out = append(w.out, ',')
		}
		c, err := w.value(e, depth+1)
		if err != nil {
			return nil, err.within(strconv.Itoa(i))
		}
		if cp != nil {
			cp[i] = c
		}
	}
	w.out = append(w.out, ']')
	if !w.copying {
		return a, nil
	}
	return cp, nil
}

func (w *valueWriter) object(m map[string]any, depth int) (any, *Error) {
	if depth+1 > w.maxDepth {
		return nil, w.fail(ErrDepth, "more than "+strconv.Itoa(w.maxDepth)+" nested containers")
	}
	base := len(w.members)
	cp, err := w.writeMembers(m, depth, base)
	clear(w.members[base:])
	w.members = w.members[:base]
	return cp, err
}

// writeMembers writes the members of m, collected on the stack above base.
func (w *valueWriter) writeMembers(m map[string]any, depth, base int) (any, *Error) {
	for k, e := range m {
		if !utf8.ValidString(k) {
			return nil, w.fail(ErrInvalidUTF8, "member name")
		}
		w.members = append(w.members, pair{k, e})
	}
	ms := w.members[base:]
	if len(ms) <= 12 {
		// Insertion sort: the small objects that dominate real documents
		// sort faster this way than through a sort function.
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && compareUTF16(ms[j-1].name, ms[j].name) > 0; j-- {
				ms[j-1], ms[j] = ms[j], ms[j-1]
			}
		}
	} else {
		slices.SortFunc(ms, func(a, b pair) int { return compareUTF16(a.name, b.name) })
	}
	var cp map[string]any
	if w.copying {
		cp = make(map[string]any, len(ms))
	}
	w.out = append(w.out, '{')
	for i := range ms {
		// Nested maps push above base and truncate back to their own base,
		// but may move the backing array: index w.members.
		p := w.members[base+i]
		if i > 0 {
			w.out = append(w.out, ',')
		}
		w.out = appendString(w.out, p.name)
		w.out = append(w.out, ':')
		c, err := w.value(p.value, depth+1)
		if err != nil {
			return nil, err.within(p.name)
		}
		if cp != nil {
			cp[p.name] = c
		}
	}
	w.out = append(w.out, '}')
	if !w.copying {
		return m, nil
	}
	return cp, nil
}

// isShortInteger reports an integer literal of at most 15 digits in JSON
// grammar other than "-0": its canonical form is itself.
func isShortInteger(n json.Number) bool {
	s := string(n)
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 15 || (s[0] == '0' && len(n) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (w *valueWriter) float(f float64) *Error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return w.fail(ErrNumber, strconv.FormatFloat(f, 'g', -1, 64)+" has no JSON form")
	}
	w.out, _ = AppendNumber(w.out, f)
	return nil
}

func (w *valueWriter) integer(i int64) *Error {
	digits := strconv.AppendInt(nil, i, 10)
	if i > maxSafeInteger || i < -maxSafeInteger {
		if why := checkLargeInteger(digits, float64(i)); why != "" {
			return w.fail(ErrNumber, string(digits)+": "+why)
		}
	}
	w.out = append(w.out, digits...)
	return nil
}

func (w *valueWriter) unsigned(u uint64) *Error {
	digits := strconv.AppendUint(nil, u, 10)
	if u > maxSafeInteger {
		if why := checkLargeInteger(digits, float64(u)); why != "" {
			return w.fail(ErrNumber, string(digits)+": "+why)
		}
	}
	w.out = append(w.out, digits...)
	return nil
}
