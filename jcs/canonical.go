package jcs

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Defaults applied when an Options field is zero.
const (
	DefaultMaxDepth = 64
	DefaultMaxSize  = 16 << 20
)

// Options bounds what a document may be. A nil *Options means the defaults.
type Options struct {
	// MaxDepth caps the nesting of arrays and objects (the document root
	// container is depth 1). Zero means DefaultMaxDepth.
	MaxDepth int
	// MaxSize caps the input in bytes. Zero means DefaultMaxSize.
	MaxSize int
	// Strings, when set, lets Decode return shared strings for the member
	// names and short values a protocol repeats in every document instead
	// of allocating them again.
	Strings *StringTable
	// ShareInput lets Decode copy the input into one string and return the
	// unescaped strings and numbers (and member names) of the document as
	// slices of it, instead of allocating each. A decoder that keeps any
	// of them keeps the whole copy alive; use it where the document lives
	// and dies as a whole, such as a received envelope. It takes precedence
	// over Strings.
	ShareInput bool
}

// StringTable is an immutable set of strings that Decode shares. Build one
// per protocol and reuse it; it is safe for concurrent use.
type StringTable struct {
	m map[string]string
	// boxed holds the same strings as interface values, so that a shared
	// string value costs no allocation at all.
	boxed map[string]any
	// lengths[c] has bit n set when a string of n bytes starting with
	// byte c is in the table (bit 63 for every length from 63 on): most
	// strings of a document are ruled out without hashing them.
	lengths [256]uint64
}

// NewStringTable returns a table of the given strings.
func NewStringTable(strs ...string) *StringTable {
	t := &StringTable{m: make(map[string]string, len(strs)), boxed: make(map[string]any, len(strs))}
	for _, s := range strs {
		t.m[s] = s
		t.boxed[s] = s
		if s != "" {
			t.lengths[s[0]] |= 1 << min(len(s), 63)
		}
	}
	return t
}

// value returns the table's interface value for raw, if it has one.
func (t *StringTable) value(raw []byte) (any, bool) {
	if len(raw) == 0 || t.lengths[raw[0]]&(1<<min(len(raw), 63)) == 0 {
		return nil, false
	}
	v, ok := t.boxed[string(raw)]
	return v, ok
}

func (o *Options) limits() (depth, size int) {
	depth, size = DefaultMaxDepth, DefaultMaxSize
	if o != nil {
		if o.MaxDepth > 0 {
			depth = o.MaxDepth
		}
		if o.MaxSize > 0 {
			size = o.MaxSize
		}
	}
	return depth, size
}

// Canonicalize decodes data strictly and returns its RFC 8785 canonical form.
func Canonicalize(data []byte) ([]byte, error) {
	return (*Options)(nil).Append(nil, data)
}

// Digest returns "sha256:" followed by the 64 lowercase hex digits of the
// SHA-256 of data's canonical form.
func Digest(data []byte) (string, error) {
	return (*Options)(nil).Digest(data)
}

// Canonicalize is the package-level Canonicalize under o's limits.
func (o *Options) Canonicalize(data []byte) ([]byte, error) {
	return o.Append(nil, data)
}

// Digest is the package-level Digest under o's limits.
func (o *Options) Digest(data []byte) (string, error) {
	c, err := o.Append(nil, data)
	if err != nil {
		return "", err
	}
	return DigestCanonical(c), nil
}

// DigestCanonical hashes bytes that are already canonical.
func DigestCanonical(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	var out [7 + 64]byte
	copy(out[:], "sha256:")
	hex.Encode(out[7:], sum[:])
	return string(out[:])
}

// IsDigest reports whether s has the form "sha256:" + 64 lowercase hex digits.
func IsDigest(s string) bool {
	if len(s) != 71 || s[:7] != "sha256:" {
		return false
	}
	for i := 7; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Append appends the canonical form of data to dst. On error dst is returned
// unchanged in length.
func (o *Options) Append(dst, data []byte) ([]byte, error) {
	maxDepth, maxSize := o.limits()
	out, err := appendCanonical(dst, data, maxDepth, maxSize)
	if err != nil { // not "return out, err": a nil *Error is a non-nil error
		return out, err
	}
	return out, nil
}

// appendCanonical is Append with explicit limits; maxDepth 0 admits scalars
// only, which an embedded json.RawMessage at the depth limit needs.
func appendCanonical(dst, data []byte, maxDepth, maxSize int) ([]byte, *Error) {
	if err := checkSize(data, maxSize); err != nil {
		return dst, err
	}
	start := len(dst)
	// Canonical output is rarely longer than the input (only "1e21" →
	// "1e+21"-style growth), so one allocation usually suffices.
	dst = slices.Grow(dst, len(data)+len(data)/16)
	c := canonicalizer{scanner: scanner{data: data, maxDepth: maxDepth}, out: dst}
	if err := c.document(); err != nil {
		return dst[:start], err.finish()
	}
	return c.out, nil
}

func checkSize(data []byte, maxSize int) *Error {
	if len(data) <= maxSize {
		return nil
	}
	return &Error{Err: ErrSize, Offset: maxSize,
		Detail: strconv.Itoa(len(data)) + " bytes, limit " + strconv.Itoa(maxSize)}
}

// canonicalizer writes the canonical form while it parses, so a document is
// read once and never held as a tree.
type canonicalizer struct {
	scanner
	out     []byte
	members []member // stack shared by all open objects
	scratch []byte
}

// member locates one "name":value pair already written to out.
type member struct {
	name       []byte // decoded name, for ordering
	start, end int    // the pair's bytes in out, without separators
	nameAt     int    // offset of the name in the input, for errors
}

func (c *canonicalizer) document() *Error {
	c.skipSpace()
	if err := c.value(0); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos != len(c.data) {
		return c.fail(ErrSyntax, "data after the top-level value")
	}
	return nil
}

func (c *canonicalizer) value(depth int) *Error {
	if c.pos >= len(c.data) {
		return c.fail(ErrSyntax, "unexpected end of input, want a value")
	}
	switch ch := c.data[c.pos]; {
	case ch == '{':
		return c.object(depth + 1)
	case ch == '[':
		return c.array(depth + 1)
	case ch == '"':
		raw, escaped, err := c.stringToken()
		if err != nil {
			return err
		}
		if !escaped {
			// Without escapes the input is already canonical: the scanner
			// has refused control characters and invalid UTF-8.
			c.out = append(c.out, '"')
			c.out = append(c.out, raw...)
			c.out = append(c.out, '"')
			return nil
		}
		c.scratch = c.scratch[:0]
		c.scratch, err = c.unescape(c.scratch, raw)
		if err != nil {
			return err
		}
		c.out = appendString(c.out, c.scratch)
		return nil
	case ch == '-' || ('0' <= ch && ch <= '9'):
		return c.number()
	default:
		lit, err := c.literal()
		c.out = append(c.out, lit...)
		return err
	}
}

func (c *canonicalizer) number() *Error {
	start := c.pos
	lit, isInt, err := c.numberToken()
	if err != nil {
		return err
	}
	// Short integers print as written in ECMAScript (all are below 2^53).
	if isInt && len(lit) <= 15 && !(len(lit) == 2 && lit[0] == '-' && lit[1] == '0') {
		c.out = append(c.out, lit...)
		return nil
	}
	f, why := parseNumber(lit, isInt)
	if why != "" {
		return &Error{Err: ErrNumber, Offset: start, Detail: string(lit) + ": " + why}
	}
	c.out, _ = AppendNumber(c.out, f) // finite by construction
	return nil
}

func (c *canonicalizer) array(depth int) *Error {
	if depth > c.maxDepth {
		return c.fail(ErrDepth, "more than "+strconv.Itoa(c.maxDepth)+" nested containers")
	}
	c.pos++ // '['
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.peek() == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err.within(strconv.Itoa(i))
		}
		c.skipSpace()
		switch c.peek() {
		case ',':
			c.pos++
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.unexpected("',' or ']'").within(strconv.Itoa(i))
		}
	}
}

func (c *canonicalizer) object(depth int) *Error {
	if depth > c.maxDepth {
		return c.fail(ErrDepth, "more than "+strconv.Itoa(c.maxDepth)+" nested containers")
	}
	c.pos++ // '{'
	c.out = append(c.out, '{')
	objStart := len(c.out)
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()
	c.skipSpace()
	if c.peek() == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	sorted := true
	for {
		c.skipSpace()
		if c.peek() != '"' {
			return c.unexpected("a member name")
		}
		nameAt := c.pos
		raw, escaped, err := c.stringToken()
		if err != nil {
			return err
		}
		name := raw
		if escaped {
			// Names with escapes get their own storage: scratch is reused by
			// nested values.
			if name, err = c.unescape(nil, raw); err != nil {
				return err
			}
		}
		if len(c.members) > base {
			prev := c.members[len(c.members)-1].name
			switch cmp := compareUTF16(prev, name); {
			case cmp == 0:
				return (&Error{Err: ErrDuplicateKey, Offset: nameAt,
					Detail: strconv.Quote(string(name))}).within(string(name))
			case cmp > 0:
				sorted = false
			}
			c.out = append(c.out, ',')
		}
		start := len(c.out)
		c.out = appendString(c.out, name)
		c.out = append(c.out, ':')
		c.skipSpace()
		if c.peek() != ':' {
			return c.unexpected("':'").within(string(name))
		}
		c.pos++
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err.within(string(name))
		}
		c.members = append(c.members, member{name: name, start: start, end: len(c.out), nameAt: nameAt})
		c.skipSpace()
		switch c.peek() {
		case ',':
			c.pos++
			continue
		case '}':
			c.pos++
		default:
			return c.unexpected("',' or '}'").within(string(name))
		}
		break
	}
	if !sorted {
		if err := c.reorder(c.members[base:], objStart); err != nil {
			return err
		}
	}
	c.out = append(c.out, '}')
	return nil
}

// reorder rewrites the members written since objStart in canonical order and
// catches duplicate names that were not adjacent in the input.
func (c *canonicalizer) reorder(ms []member, objStart int) *Error {
	sortMembers(ms) // stable: of two equal names, the later one is second
	for i := 1; i < len(ms); i++ {
		if compareUTF16(ms[i-1].name, ms[i].name) == 0 {
			return (&Error{Err: ErrDuplicateKey, Offset: ms[i].nameAt,
				Detail: strconv.Quote(string(ms[i].name))}).within(string(ms[i].name))
		}
	}
	c.scratch = append(c.scratch[:0], c.out[objStart:]...)
	c.out = c.out[:objStart]
	for i, m := range ms {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.scratch[m.start-objStart:m.end-objStart]...)
	}
	return nil
}

// sortMembers is an insertion sort for the small objects that dominate real
// documents and a merge sort beyond that; both are stable and allocation-free
// for small inputs.
func sortMembers(ms []member) {
	if len(ms) <= 12 {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && compareUTF16(ms[j-1].name, ms[j].name) > 0; j-- {
				ms[j-1], ms[j] = ms[j], ms[j-1]
			}
		}
		return
	}
	tmp := make([]member, len(ms))
	mergeSort(ms, tmp)
}

func mergeSort(ms, tmp []member) {
	if len(ms) <= 12 {
		sortMembers(ms)
		return
	}
	mid := len(ms) / 2
	mergeSort(ms[:mid], tmp[:mid])
	mergeSort(ms[mid:], tmp[mid:])
	copy(tmp, ms)
	i, j, k := 0, mid, 0
	for i < mid && j < len(ms) {
		if compareUTF16(tmp[j].name, tmp[i].name) < 0 {
			ms[k] = tmp[j]
			j++
		} else {
			ms[k] = tmp[i]
			i++
		}
		k++
	}
	k += copy(ms[k:], tmp[i:mid])
	copy(ms[k:], tmp[j:])
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 §3.2.3 requires. UTF-8 byte order equals code point order, which
// differs from UTF-16 order only where a supplementary character (a surrogate
// pair, 0xD800-0xDBFF first) meets a character in U+E000-U+FFFF.
func compareUTF16[T string | []byte](a, b T) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	// Back up to the start of the rune that differs.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, rb := runeAt(a, i), runeAt(b, i)
	ka, kb := firstUnit(ra), firstUnit(rb)
	if ka != kb {
		return int(ka) - int(kb)
	}
	return int(ra) - int(rb)
}

// runeAt decodes the rune starting at s[i] of a string already known to be
// valid UTF-8 (an ASCII byte, or a lead byte followed by its continuations).
func runeAt[T string | []byte](s T, i int) rune {
	switch c := s[i]; {
	case c < utf8.RuneSelf:
		return rune(c)
	case c < 0xE0:
		return rune(c&0x1F)<<6 | rune(s[i+1]&0x3F)
	case c < 0xF0:
		return rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
	default:
		return rune(c&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F)
	}
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// appendString writes s (valid UTF-8) as a JSON string with exactly the
// escapes RFC 8785 §3.2.2.2 allows.
func appendString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 0x20 && ch != '"' && ch != '\\' {
			continue
		}
		dst = append(dst, s[last:i]...)
		last = i + 1
		switch ch {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hexDigits = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xF])
		}
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}
