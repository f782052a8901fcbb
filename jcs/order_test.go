package jcs_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
)

// TestReferenceOrder pins the reference comparison itself on the cases where
// UTF-16 order and code point order disagree.
func TestReferenceOrder(t *testing.T) {
	ordered := []string{"", "\x00", "A", "a", "ab", "\u00e9", "\u07ff", "\u0800", "\ud7ff",
		"\U00010000", "\U0001F600", "\U0010FFFF", "\ue000", "\ufb33", "\uffff"}
	for i := 1; i < len(ordered); i++ {
		if !utf16Less(ordered[i-1], ordered[i]) || utf16Less(ordered[i], ordered[i-1]) {
			t.Fatalf("reference order broken between %+q and %+q", ordered[i-1], ordered[i])
		}
	}
}

// canonicalObject builds the expected canonical object for names whose
// characters never need escaping, each mapped to its index in names.
func canonicalObject(names []string) string {
	idx := make(map[string]int, len(names))
	for i, n := range names {
		idx[n] = i
	}
	sorted := append([]string(nil), names...)
	sort.Slice(sorted, func(i, j int) bool { return utf16Less(sorted[i], sorted[j]) })
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range sorted {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + n + `":` + strconv.Itoa(idx[n]))
	}
	b.WriteByte('}')
	return b.String()
}

// inputObject writes names in the given order, mapped to their index in
// names, with some whitespace.
func inputObject(names []string, order []int) string {
	var b strings.Builder
	b.WriteString("{ ")
	for i, k := range order {
		if i > 0 {
			b.WriteString(" ,\n ")
		}
		b.WriteString(`"` + names[k] + `"` + " : " + strconv.Itoa(k))
	}
	b.WriteString(" }")
	return b.String()
}

func TestKeyOrdering(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty object", `{}`, `{}`},
		{"empty key first", `{"a":1,"":0}`, `{"":0,"a":1}`},
		{"prefix before extension", `{"abc":3,"ab":2,"a":1,"abcd":4}`, `{"a":1,"ab":2,"abc":3,"abcd":4}`},
		{"uppercase before lowercase", `{"b":1,"B":2,"a":3,"A":4}`, `{"A":4,"B":2,"a":3,"b":1}`},
		{"digits before letters", `{"a":1,"1":2,"_":3,"0":4}`, `{"0":4,"1":2,"_":3,"a":1}`},
		{"supplementary before U+FB33", "{\"\uFB33\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\uFB33\":1}"},
		{"supplementary before U+E000", "{\"\uE000\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\uE000\":1}"},
		{"supplementary before U+FFFF", "{\"\uFFFF\":1,\"\U00010000\":2}", "{\"\U00010000\":2,\"\uFFFF\":1}"},
		{"supplementary after U+D7FF", "{\"\U0001F600\":1,\"\uD7FF\":2}", "{\"\uD7FF\":2,\"\U0001F600\":1}"},
		{"supplementary after U+0800", "{\"\U0001F600\":1,\"\u0800\":2}", "{\"\u0800\":2,\"\U0001F600\":1}"},
		{"U+10FFFF before U+E000", "{\"\uE000\":1,\"\U0010FFFF\":2}", "{\"\U0010FFFF\":2,\"\uE000\":1}"},
		{"two supplementary by low surrogate", "{\"\U0001F601\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\U0001F601\":1}"},
		{"two supplementary by high surrogate", "{\"\U00020000\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\U00020000\":1}"},
		{"difference after common prefix", "{\"x\uFB33\":1,\"x\U0001F600\":2,\"x\":3}", "{\"x\":3,\"x\U0001F600\":2,\"x\uFB33\":1}"},
		{"difference after common multibyte prefix", "{\"\u00e9\uFB33\":1,\"\u00e9\U0001F600\":2}", "{\"\u00e9\U0001F600\":2,\"\u00e9\uFB33\":1}"},
		{"escaped names sort by decoded value", `{"\u0062":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{"escaped surrogate pair name", `{"\ufb33":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\uFB33\":1}"},
		{"names with escapes keep escapes", `{"b\n":1,"b\"":2,"b\\":3,"b":4}`, `{"b":4,"b\n":1,"b\"":2,"b\\":3}`},
		{"nested objects sorted independently",
			`{"z":{"b":1,"a":{"d":1,"c":2}},"y":[{"k":1,"j":2}]}`,
			`{"y":[{"j":2,"k":1}],"z":{"a":{"c":2,"d":1},"b":1}}`},
		{"already sorted", `{"a":1,"b":2,"c":3}`, `{"a":1,"b":2,"c":3}`},
		{"reverse sorted", `{"c":1,"b":2,"a":3}`, `{"a":3,"b":2,"c":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCanonical(t, tt.in, tt.want) })
	}
}

func TestDuplicateNamesInOrdering(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`,
		`{"a":1,"\u0061":2}`,
		`{"\u0061":1,"a":2}`,
		`{"a":1,"b":2,"a":3}`,
		`{"b":1,"a":2,"c":3,"b":4}`,
		"{\"\U0001F600\":1,\"\uFB33\":2,\"\\ud83d\\ude00\":3}",
		`{"":1,"x":2,"":3}`,
	} {
		t.Run(in, func(t *testing.T) {
			if out, err := jcs.Canonicalize([]byte(in)); !errors.Is(err, jcs.ErrDuplicateKey) {
				t.Fatalf("Canonicalize(%q) = %q, %v; want ErrDuplicateKey", in, out, err)
			}
			if _, err := jcs.Decode([]byte(in)); !errors.Is(err, jcs.ErrDuplicateKey) {
				t.Fatalf("Decode(%q) error = %v; want ErrDuplicateKey", in, err)
			}
		})
	}
}

// namePool returns n distinct member names drawn from the character ranges
// where UTF-16 and code point order differ, none needing escapes.
func namePool(r *rand.Rand, n int) []string {
	ranges := [][2]rune{
		{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {0xA0, 0x7FF}, {0x800, 0xD7FF},
		{0xE000, 0xFFFD}, {0x10000, 0x1FFFF}, {0x20000, 0x10FFFF},
	}
	seen := map[string]bool{}
	var names []string
	for len(names) < n {
		var b strings.Builder
		l := r.IntN(4)
		if len(names) == 0 {
			l = 0 // the empty name
		}
		for range l {
			rg := ranges[r.IntN(len(ranges))]
			c := rg[0] + r.Int32N(rg[1]-rg[0]+1)
			if !utf8.ValidRune(c) {
				c = 'x'
			}
			b.WriteRune(c)
		}
		// Shared prefixes: extend an existing name now and then.
		s := b.String()
		if len(names) > 0 && r.IntN(4) == 0 {
			s = names[r.IntN(len(names))] + s
		}
		if !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	return names
}

func TestKeyOrderingLargeShuffled(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 2))
	for _, n := range []int{2, 5, 12, 13, 14, 25, 64, 101, 257, 1000, 5000} {
		for trial := range 4 {
			t.Run(fmt.Sprintf("%d-members/%d", n, trial), func(t *testing.T) {
				names := namePool(r, n)
				order := r.Perm(n)
				want := canonicalObject(names)
				checkCanonical(t, inputObject(names, order), want)

				// The same members nested one level down, next to others.
				nested := `{"z":` + inputObject(names, order) + `,"a":[` + inputObject(names, r.Perm(n)) + `]}`
				checkCanonical(t, nested, `{"a":[`+want+`],"z":`+want+`}`)

				// A duplicate of a random member anywhere in the object.
				if n > 1 {
					dupOrder := append(append([]int(nil), order...), order[r.IntN(n)])
					r.Shuffle(len(dupOrder), func(i, j int) { dupOrder[i], dupOrder[j] = dupOrder[j], dupOrder[i] })
					in := inputObject(names, dupOrder)
					if _, err := jcs.Canonicalize([]byte(in)); !errors.Is(err, jcs.ErrDuplicateKey) {
						t.Fatalf("Canonicalize with a duplicate member: error %v, want ErrDuplicateKey", err)
					}
					if _, err := jcs.Decode([]byte(in)); !errors.Is(err, jcs.ErrDuplicateKey) {
						t.Fatalf("Decode with a duplicate member: error %v, want ErrDuplicateKey", err)
					}
				}
			})
		}
	}
}

// TestKeyOrderingEscapedNames writes every name of a large object with \u
// escapes (surrogate pairs for supplementary characters).
func TestKeyOrderingEscapedNames(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	names := namePool(r, 300)
	order := r.Perm(len(names))
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range order {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, c := range names[k] {
			if c >= 0x10000 {
				c -= 0x10000
				fmt.Fprintf(&b, `\u%04X\u%04x`, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
			} else {
				fmt.Fprintf(&b, `\u%04x`, c)
			}
		}
		fmt.Fprintf(&b, `":%d`, k)
	}
	b.WriteByte('}')
	checkCanonical(t, b.String(), canonicalObject(names))
}
