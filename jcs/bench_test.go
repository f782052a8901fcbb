package jcs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	gowebpki "github.com/gowebpki/jcs"

	"github.com/custos-runtime/custos/jcs"
)

// benchWords are string fragments with some unicode and JSON escapes, as
// they appear in the JSON text.
var benchWords = []string{
	"alpha", "beta", "gamma", "delta", "na\u00efve", "caf\\u00e9", "\u65e5\u672c\u8a9e", "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439",
	"emoji \U0001F600", "\\ud83d\\ude80 launch", "tab\\there", "say \\\"hi\\\"", "back\\\\slash", "line\\nbreak",
	"path\\/to\\/file", "ctrl\\u0001x", "\u00fcber", "\u20ac 100", "<tag>&amp;", "plain text value",
}

var benchKeys = []string{
	"id", "name", "email", "type", "status", "created_at", "updated_at", "tags", "score", "ratio",
	"enabled", "owner", "payload", "items", "meta", "description", "version", "priority", "region", "\u00e9tat",
}

type benchGen struct {
	r *rand.Rand
	b strings.Builder
}

func (g *benchGen) str() {
	g.b.WriteByte('"')
	for i := range 1 + g.r.IntN(3) {
		if i > 0 {
			g.b.WriteByte(' ')
		}
		g.b.WriteString(benchWords[g.r.IntN(len(benchWords))])
	}
	g.b.WriteByte('"')
}

func (g *benchGen) number() {
	switch g.r.IntN(4) {
	case 0:
		g.b.WriteString(strconv.Itoa(g.r.IntN(100000)))
	case 1:
		g.b.WriteString(strconv.FormatInt(g.r.Int64N(1<<53)-1<<52, 10))
	case 2:
		g.b.WriteString(strconv.FormatFloat(g.r.Float64()*1e6, 'f', g.r.IntN(6), 64))
	default:
		g.b.WriteString(strconv.FormatFloat(g.r.NormFloat64()*math10(g.r.IntN(40)-20), 'g', -1, 64))
	}
}

func math10(e int) float64 {
	f := 1.0
	for ; e > 0; e-- {
		f *= 10
	}
	for ; e < 0; e++ {
		f /= 10
	}
	return f
}

func (g *benchGen) value(depth int) {
	k := g.r.IntN(10)
	if depth > 3 {
		k %= 6
	}
	switch {
	case k < 2:
		g.str()
	case k < 4:
		g.number()
	case k == 4:
		g.b.WriteString([]string{"true", "false", "null"}[g.r.IntN(3)])
	case k == 5:
		g.str()
	case k < 8:
		g.object(depth+1, 2+g.r.IntN(6))
	default:
		g.b.WriteString("[")
		for i := range g.r.IntN(6) {
			if i > 0 {
				g.b.WriteString(", ")
			}
			g.value(depth + 1)
		}
		g.b.WriteString("]")
	}
}

// object writes n members with distinct names in random (unsorted) order.
func (g *benchGen) object(depth, n int) {
	g.b.WriteString("{")
	for i, k := range g.r.Perm(len(benchKeys))[:min(n, len(benchKeys))] {
		if i > 0 {
			g.b.WriteString(",")
		}
		g.b.WriteString("\n" + strings.Repeat("  ", depth) + `"` + benchKeys[k] + `": `)
		g.value(depth)
	}
	g.b.WriteString("}")
}

// benchDoc returns a deterministic document of about size bytes: an object
// with a list of records and some metadata.
func benchDoc(size int) []byte {
	g := &benchGen{r: rand.New(rand.NewPCG(uint64(size), 42))}
	g.b.WriteString(`{"version": 3, "meta": `)
	g.object(1, 5)
	g.b.WriteString(`, "records": [`)
	for i := 0; g.b.Len() < size-200; i++ {
		if i > 0 {
			g.b.WriteString(",")
		}
		g.b.WriteString(fmt.Sprintf(`{"seq": %d, "data": `, i))
		g.object(2, 3+g.r.IntN(5))
		g.b.WriteString("}")
	}
	g.b.WriteString("]}")
	return []byte(g.b.String())
}

var benchSizes = []struct {
	name string
	size int
}{{"1KB", 1 << 10}, {"10KB", 10 << 10}, {"100KB", 100 << 10}}

// TestBenchDocs checks the benchmark documents are valid and that both
// implementations agree on them, so the benchmark compares equal work.
func TestBenchDocs(t *testing.T) {
	for _, s := range benchSizes {
		doc := benchDoc(s.size)
		ours, err := jcs.Canonicalize(doc)
		if err != nil {
			t.Fatalf("%s: Canonicalize: %v", s.name, err)
		}
		theirs, err := gowebpki.Transform(doc)
		if err != nil {
			t.Fatalf("%s: gowebpki.Transform: %v", s.name, err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("%s: outputs differ\n%s", s.name, diff(string(ours), string(theirs)))
		}
		if n := len(doc); n < s.size*3/4 || n > s.size*5/4 {
			t.Fatalf("%s: document is %d bytes", s.name, n)
		}
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	for _, s := range benchSizes {
		doc := benchDoc(s.size)
		ours, err := jcs.Canonicalize(doc)
		if err != nil {
			b.Fatalf("%s: Canonicalize: %v", s.name, err)
		}
		theirs, err := gowebpki.Transform(doc)
		if err != nil {
			b.Fatalf("%s: gowebpki.Transform: %v", s.name, err)
		}
		if !bytes.Equal(ours, theirs) {
			b.Fatalf("%s: outputs differ\n%s", s.name, diff(string(ours), string(theirs)))
		}
		b.Run(s.name, func(b *testing.B) {
			b.Run("custos", func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := jcs.Canonicalize(doc); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("gowebpki", func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := gowebpki.Transform(doc); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
