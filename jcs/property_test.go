package jcs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
)

// jv is a generated JSON value. Its canonical text is computed by the
// reference functions below, independently of the package.
type jv struct {
	kind    byte   // 'n' null, 't' true, 'f' false, '#' number, 's' string, '[' array, '{' object
	numIn   string // number literal as written
	numWant string // its canonical text
	str     string // decoded string value
	elems   []*jv
	keys    []string // decoded member names, distinct
}

type docGen struct {
	r        *rand.Rand
	maxDepth int
}

var stringRunePools = [][2]rune{
	{0x20, 0x7e}, {0x20, 0x7e}, {0x20, 0x7e}, // ASCII printable, most common
	{0x00, 0x1f}, // controls
	{0x7f, 0x9f}, // DEL and C1
	{0xa0, 0x7ff},
	{0x800, 0xd7ff},
	{0xe000, 0xfffd},
	{0x2028, 0x2029},
	{0x10000, 0x10ffff},
	{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'<', '>'},
}

func (g *docGen) str(maxLen int) string {
	var b strings.Builder
	for range g.r.IntN(maxLen + 1) {
		p := stringRunePools[g.r.IntN(len(stringRunePools))]
		c := p[0] + g.r.Int32N(p[1]-p[0]+1)
		if !utf8.ValidRune(c) {
			c = '?'
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (g *docGen) value(depth int) *jv {
	k := g.r.IntN(10)
	if depth >= g.maxDepth {
		k = g.r.IntN(6)
	}
	switch k {
	case 0:
		return &jv{kind: 'n'}
	case 1:
		if g.r.IntN(2) == 0 {
			return &jv{kind: 't'}
		}
		return &jv{kind: 'f'}
	case 2, 3:
		if g.r.IntN(3) == 0 {
			n := g.r.Int64N(1<<53) >> g.r.IntN(53)
			if g.r.IntN(2) == 0 {
				n = -n
			}
			s := strconv.FormatInt(n, 10)
			return &jv{kind: '#', numIn: s, numWant: s}
		}
		row := numberTable[g.r.IntN(len(numberTable))]
		return &jv{kind: '#', numIn: row.in, numWant: row.want}
	case 4, 5:
		return &jv{kind: 's', str: g.str(12)}
	case 6, 7:
		v := &jv{kind: '['}
		for range g.r.IntN(6) {
			v.elems = append(v.elems, g.value(depth+1))
		}
		return v
	default:
		v := &jv{kind: '{'}
		seen := map[string]bool{}
		n := g.r.IntN(8)
		if g.r.IntN(10) == 0 {
			n = 13 + g.r.IntN(40) // beyond the small-object sort
		}
		for range n {
			name := g.str(5)
			if seen[name] {
				continue
			}
			seen[name] = true
			v.keys = append(v.keys, name)
			v.elems = append(v.elems, g.value(depth+1))
		}
		return v
	}
}

// refString is the reference RFC 8785 §3.2.2.2 string serialization.
func refString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// refCanonical is the reference canonical form of v.
func refCanonical(v *jv) string {
	switch v.kind {
	case 'n':
		return "null"
	case 't':
		return "true"
	case 'f':
		return "false"
	case '#':
		return v.numWant
	case 's':
		return refString(v.str)
	case '[':
		parts := make([]string, len(v.elems))
		for i, e := range v.elems {
			parts[i] = refCanonical(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	idx := make([]int, len(v.keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return utf16Less(v.keys[idx[a]], v.keys[idx[b]]) })
	parts := make([]string, len(idx))
	for i, k := range idx {
		parts[i] = refString(v.keys[k]) + ":" + refCanonical(v.elems[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

var whitespaces = []string{"", "", "", " ", "\n", "\t", "\r\n  ", "  \t"}

func (g *docGen) ws(b *strings.Builder) { b.WriteString(whitespaces[g.r.IntN(len(whitespaces))]) }

// renderString writes s as a JSON string, choosing among the equivalent
// escaped and unescaped spellings at random.
func (g *docGen) renderString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, c := range s {
		mustEscape := c < 0x20 || c == '"' || c == '\\'
		if !mustEscape && g.r.IntN(6) != 0 {
			b.WriteRune(c)
			continue
		}
		short := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}[c]
		hexFmt := `\u%04x`
		if g.r.IntN(2) == 0 {
			hexFmt = `\u%04X`
		}
		switch {
		case short != "" && g.r.IntN(2) == 0:
			b.WriteString(short)
		case c >= 0x10000:
			c -= 0x10000
			fmt.Fprintf(b, hexFmt+hexFmt, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		default:
			fmt.Fprintf(b, hexFmt, c)
		}
	}
	b.WriteByte('"')
}

// render writes v as JSON text with random whitespace, member order and
// string escaping.
func (g *docGen) render(b *strings.Builder, v *jv) {
	switch v.kind {
	case 'n':
		b.WriteString("null")
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case '#':
		b.WriteString(v.numIn)
	case 's':
		g.renderString(b, v.str)
	case '[':
		b.WriteByte('[')
		g.ws(b)
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
				g.ws(b)
			}
			g.render(b, e)
			g.ws(b)
		}
		b.WriteByte(']')
	case '{':
		b.WriteByte('{')
		g.ws(b)
		for i, k := range g.r.Perm(len(v.keys)) {
			if i > 0 {
				b.WriteByte(',')
				g.ws(b)
			}
			g.renderString(b, v.keys[k])
			g.ws(b)
			b.WriteByte(':')
			g.ws(b)
			g.render(b, v.elems[k])
			g.ws(b)
		}
		b.WriteByte('}')
	}
}

func (g *docGen) text(v *jv) string {
	var b strings.Builder
	g.ws(&b)
	g.render(&b, v)
	g.ws(&b)
	return b.String()
}

// generatedDocs returns n generated values with a fixed seed.
func generatedDocs(seed uint64, n int) (*docGen, []*jv) {
	g := &docGen{r: rand.New(rand.NewPCG(seed, 8785)), maxDepth: 5}
	vs := make([]*jv, n)
	for i := range vs {
		vs[i] = g.value(0)
	}
	return g, vs
}

// TestGeneratedDocuments checks Canonicalize against the reference
// serialization, idempotence, and invariance under member order, whitespace
// and escaping choices.
func TestGeneratedDocuments(t *testing.T) {
	g, docs := generatedDocs(1, 2000)
	notIdempotent := 0
	defer func() {
		if notIdempotent > 0 {
			t.Errorf("%d of %d generated documents are not idempotent", notIdempotent, len(docs))
		}
	}()
	for i, v := range docs {
		want := refCanonical(v)
		in1 := g.text(v)
		in2 := g.text(v)
		out1, err := jcs.Canonicalize([]byte(in1))
		if err != nil {
			t.Fatalf("doc %d: Canonicalize(%s): %v", i, clip(in1), err)
		}
		if string(out1) != want {
			t.Fatalf("doc %d: Canonicalize(%s) differs from reference\n%s", i, clip(in1), diff(string(out1), want))
		}
		out2, err := jcs.Canonicalize([]byte(in2))
		if err != nil || !bytes.Equal(out1, out2) {
			t.Fatalf("doc %d: permuted rendering %s gives %s, %v; want %s", i, clip(in2), clip(string(out2)), err, clip(string(out1)))
		}
		again, err := jcs.Canonicalize(out1)
		if err != nil || !bytes.Equal(again, out1) {
			// Reported, not fatal, so the other properties keep running.
			if notIdempotent++; notIdempotent <= 5 {
				t.Errorf("doc %d: not idempotent: Canonicalize(%s) = %s, %v", i, clip(string(out1)), clip(string(again)), err)
			}
		}
		dv, err := jcs.Decode([]byte(in2))
		if err != nil {
			t.Fatalf("doc %d: Decode: %v", i, err)
		}
		viaValue, err := jcs.CanonicalizeValue(dv)
		if err != nil || !bytes.Equal(viaValue, out1) {
			t.Fatalf("doc %d: CanonicalizeValue(Decode) = %s, %v; want %s", i, clip(string(viaValue)), err, clip(string(out1)))
		}
	}
}

func TestIdempotenceCorpus(t *testing.T) {
	corpus := validCorpus(t)
	failed := 0
	for i, doc := range corpus {
		once := mustCanonicalize(t, doc)
		twice, err := jcs.Canonicalize(once)
		if err == nil && bytes.Equal(once, twice) {
			continue
		}
		if failed++; failed <= 5 {
			if err != nil {
				t.Errorf("corpus[%d]: Canonicalize(Canonicalize(%s)) failed: %v", i, clip(string(doc)), err)
			} else {
				t.Errorf("corpus[%d]: Canonicalize not idempotent\n%s", i, diff(string(twice), string(once)))
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d corpus documents are not idempotent", failed, len(corpus))
	}
}

// TestCanonicalNumbersReparse: every canonical number text is itself a valid
// input that canonicalizes to itself. RFC 8785 output must be accepted by
// the same canonicalizer (a verifier re-canonicalizes what a signer sent),
// including integral doubles of 2^53 and above such as Appendix B's
// 9007199254740992 and 295147905179352830000.
func TestCanonicalNumbersReparse(t *testing.T) {
	seen := map[string]bool{}
	for _, row := range numberTable {
		other := "-" + row.want
		if strings.HasPrefix(row.want, "-") {
			other = row.want[1:]
		}
		for _, s := range []string{row.want, other} {
			if seen[s] || s == "-0" {
				continue
			}
			seen[s] = true
			t.Run(s, func(t *testing.T) {
				got, err := jcs.Canonicalize([]byte(s))
				if err != nil || string(got) != s {
					t.Fatalf("Canonicalize(%q) = %q, %v; want %q (canonical output must re-canonicalize to itself)", s, got, err, s)
				}
				if _, err := jcs.Decode([]byte(s)); err != nil {
					t.Fatalf("Decode(%q): %v", s, err)
				}
			})
		}
	}
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func TestDigestFormat(t *testing.T) {
	for i, doc := range validCorpus(t) {
		d, err := jcs.Digest(doc)
		if err != nil {
			t.Fatalf("corpus[%d]: %v", i, err)
		}
		if !digestRE.MatchString(d) || !jcs.IsDigest(d) {
			t.Fatalf("corpus[%d]: Digest = %q, not sha256:<64 lowercase hex>", i, d)
		}
		sum := sha256.Sum256(mustCanonicalize(t, doc))
		if want := "sha256:" + hex.EncodeToString(sum[:]); d != want {
			t.Fatalf("corpus[%d]: Digest = %q, want %q", i, d, want)
		}
	}
	// Known answer: SHA-256 of the empty object "{}".
	if d, err := jcs.Digest([]byte(" { } ")); err != nil || d != "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatalf("Digest({}) = %q, %v", d, err)
	}
	if d := jcs.DigestCanonical(nil); d != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("DigestCanonical(nil) = %q", d)
	}
}

func TestIsDigest(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		s    string
		want bool
	}{
		{"sha256:" + hex64, true},
		{"sha256:" + strings.Repeat("0", 64), true},
		{"sha256:" + strings.Repeat("f", 64), true},
		{"sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8", true},
		{"", false},
		{"sha256:", false},
		{hex64, false},
		{"sha256:" + hex64[:63], false},
		{"sha256:" + hex64 + "0", false},
		{"sha256:" + strings.ToUpper(hex64), false},
		{"sha256:" + hex64[:63] + "A", false},
		{"sha256:" + hex64[:63] + "g", false},
		{"SHA256:" + hex64, false},
		{"sha-256:" + hex64, false},
		{"sha512:" + hex64, false},
		{"sha256 " + hex64, false},
		{"sha256:" + hex64[:63] + " ", false},
		{" sha256:" + hex64[:63], false},
		{"sha256:" + hex64 + "\n", false},
		{"sha256:" + hex64[:62] + "\u00e9", false},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.s), func(t *testing.T) {
			if got := jcs.IsDigest(tt.s); got != tt.want {
				t.Fatalf("IsDigest(%q) = %v, want %v", tt.s, got, tt.want)
			}
		})
	}
}
