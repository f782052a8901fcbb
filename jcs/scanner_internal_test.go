package jcs

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

// plainByte is the definition plain8 implements for one byte.
func plainByte(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

// firstSpecial is the index of the first byte of b that is not plain, or
// len(b).
func firstSpecial(b []byte) int {
	for i, c := range b {
		if !plainByte(c) {
			return i
		}
	}
	return len(b)
}

// TestSpecial8 checks the eight-byte string scan against its definition
// (zero exactly when every byte is plain, and otherwise the lowest mark on
// the first byte that is not): every byte value in every lane of plain
// words, with a second byte in every other lane, and random words.
func TestSpecial8(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		m := special8(binary.LittleEndian.Uint64(b))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if want := firstSpecial(b); got != want {
			t.Fatalf("special8(%q) = %#x: first special byte %d, want %d", b, m, got, want)
		}
	}
	for lane := 0; lane < 8; lane++ {
		for c := 0; c < 256; c++ {
			for _, fill := range []byte{'a', ' ', 0x7f, '~', '!', '#', '[', ']'} {
				w := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
				w[lane] = byte(c)
				check(w)
				for other := 0; other < 8; other++ {
					if other != lane {
						w2 := append([]byte(nil), w...)
						w2[other] = byte(255 - c)
						check(w2)
					}
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 8)
	for i := 0; i < 300_000; i++ {
		for j := range b {
			if rng.IntN(4) == 0 {
				b[j] = byte(rng.IntN(256))
			} else {
				b[j] = byte(0x20 + rng.IntN(0x60))
			}
		}
		check(b)
	}
}

// canonicalFlag decodes data and returns the decoder's verdict on whether
// data is its own canonical form.
func canonicalFlag(t *testing.T, data []byte) (bool, bool) {
	t.Helper()
	d := decoders.Get().(*decoder)
	defer d.release()
	_, err := d.document(nil, data, DefaultMaxDepth, "security")
	return d.canonical, err == nil
}

// TestCanonicalFlag checks that the decoder calls a document canonical
// exactly when Canonicalize returns it unchanged, so that DecodeCanonical
// copies the input whenever it can and only then.
func TestCanonicalFlag(t *testing.T) {
	docs := []string{
		`{}`, `{"a":1,"b":[1,2,{"c":"d"}]}`, `{"b":1,"a":2}`, ` {}`, `{"a":-0}`, `{"a":0}`, `{"a":1.0}`,
		`{"a":1e+21}`, `{"a":1e21}`, `{"a":"\u00e9"}`, `{"a":"é"}`, `{"a":"\u001f"}`, `{"a":"\u001F"}`,
		`{"a":"\n"}`, `{"a":"\u000a"}`, `{"a":"\/"}`, `{"€":1,"😀":2}`, `{"😀":2,"€":1}`,
		`{"a":123456789012345}`, `{"a":1234567890123456}`, `{"a":100000000000000000000}`, `{"a":1E+21}`,
		`{"a":0.1}`, `{"a":.1}`, `{"a":1e-7}`, `{"a":0.0000001}`, `"\ud83d\ude00"`, `"😀"`,
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 500; i++ {
		b := []byte{'{'}
		for n := rng.IntN(4); n > 0; n-- {
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, '"')
			for m := rng.IntN(3); m > 0; m-- {
				b = append(b, []string{"a", "b", `\u0061`, "é", "😀", "€", `\"`, `\/`}[rng.IntN(8)]...)
			}
			b = append(b, `":`...)
			b = append(b, []string{"1", "-0", "1.50", "2e3", `"\u0007"`, `"\t"`, " 3", "[]"}[rng.IntN(8)]...)
		}
		docs = append(docs, string(append(b, '}')))
	}
	for _, doc := range docs {
		flag, ok := canonicalFlag(t, []byte(doc))
		c, err := Canonicalize([]byte(doc))
		if !ok || err != nil {
			continue
		}
		if want := string(c) == doc; flag != want {
			t.Errorf("%s: canonical flag %v, want %v (canonical form %s)", doc, flag, want, c)
		}
	}
}

// TestDecoderStacksClean checks what release relies on: after a document,
// decoded or refused anywhere, the stacks hold no value up to capacity.
func TestDecoderStacksClean(t *testing.T) {
	docs := []string{
		`[[1,2,[3,"x",{"a":[1,2,}]]]`, `{"a":[1,{"b":[2,3`, `[1,2,3,{"a":1,"a":2}]`, `{"a":[1,2],"b":{"c":[3,4,x]}}`,
		`[` + strings.Repeat(`{"k":"v","n":[1,2,3]},`, 200) + `1]`, `{"big":{` + bigMembers(40) + `}}`, `{"big":{` + bigMembers(40) + `,"m0":1}}`,
		`[1,[2,[3,[4,"\ud800"]]]]`, `[1,2,3]`, `{}`,
	}
	for _, doc := range docs {
		d := &decoder{elems: make([]any, 0, 4), pairs: make([]pair, 0, 4)}
		_, _ = d.document(nil, []byte(doc), DefaultMaxDepth, "")
		if len(d.elems) != 0 || len(d.pairs) != 0 {
			t.Fatalf("%.40s: stacks left at %d, %d", doc, len(d.elems), len(d.pairs))
		}
		for i, e := range d.elems[:cap(d.elems)] {
			if e != nil {
				t.Fatalf("%.40s: elems[%d] = %v after the document", doc, i, e)
			}
		}
		for i, p := range d.pairs[:cap(d.pairs)] {
			if p.name != "" || p.value != nil {
				t.Fatalf("%.40s: pairs[%d] = %v after the document", doc, i, p)
			}
		}
	}
}

func bigMembers(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m%d":[%d,"s"]`, i, i)
	}
	return b.String()
}
