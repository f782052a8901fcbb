package jcs_test

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// checkDecodeCanonical compares DecodeCanonical with the general route it
// must equal: Decode, then AppendValue of the value without omit. Every
// option combination DecodeCanonical changes behaviour for is tried.
func checkDecodeCanonical(t *testing.T, data []byte, omit string) {
	t.Helper()
	want, werr := jcs.Decode(data)
	for _, o := range []*jcs.Options{nil, {ShareInput: true}, {Strings: jcs.NewStringTable("a", "b", "security")}} {
		prefix := []byte("prefix")
		v, out, err := o.DecodeCanonical(prefix, data, omit)
		if (err == nil) != (werr == nil) {
			t.Fatalf("DecodeCanonical(%s, %q) error %v, Decode error %v", clip(string(data)), omit, err, werr)
		}
		if err != nil {
			checkPackageError(t, "DecodeCanonical", data, err)
			if err.Error() != werr.Error() {
				t.Fatalf("DecodeCanonical(%s): error %q, Decode error %q", clip(string(data)), err, werr)
			}
			if v != nil || string(out) != "prefix" {
				t.Fatalf("DecodeCanonical(%s) returned %#v, %q with an error", clip(string(data)), v, out)
			}
			continue
		}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("DecodeCanonical(%s) value %#v, Decode %#v", clip(string(data)), v, want)
		}
		rest := want
		if m, ok := want.(map[string]any); ok && omit != "" {
			if _, present := m[omit]; present {
				c := make(map[string]any, len(m))
				for k, e := range m {
					if k != omit {
						c[k] = e
					}
				}
				rest = c
			}
		}
		canon, err := jcs.CanonicalizeValue(rest)
		if err != nil {
			t.Fatalf("CanonicalizeValue(Decode(%s)): %v", clip(string(data)), err)
		}
		if !bytes.Equal(out, append([]byte("prefix"), canon...)) {
			t.Fatalf("DecodeCanonical(%s, %q) = %s, general route %s", clip(string(data)), omit, clip(string(out)), clip(string(canon)))
		}
	}
}

var decodeCanonicalCases = []string{
	// Canonical documents: the bytes are copied.
	`{}`, `[]`, `1`, `"x"`, `null`, `true`,
	`{"security":{"sig":"x"}}`,
	`{"a":1,"security":{"sig":"x"}}`,
	`{"security":{"sig":"x"},"z":1}`,
	`{"a":1,"security":{"sig":"x"},"z":[1,2]}`,
	`{"a":{"security":1},"b":[{"security":2}]}`,
	`{"":1,"a":2}`,
	`{"a":"\u001f\n\"\\","b":"é€😀"}`,
	`{"a":1e+21,"b":1e-7,"c":0.1,"d":-5,"e":123456789012345}`,
	`{"\u0000":1,"a":2}`,
	`{"€":1,"😀":2}`, // U+1F600 sorts before U+20AC in UTF-16
	// Not canonical: written again from the value.
	` {"a":1}`, `{"a":1} `, `{"a" :1}`, `{"a": 1}`, "{\"a\":1,\n\"b\":2}",
	`{"b":1,"a":2}`, `{"b":1,"security":2,"a":3}`, `{"security":2,"b":1,"a":3}`,
	`{"😀":2,"€":1}`,
	`{"a":-0}`, `{"a":1.0}`, `{"a":1E2}`, `{"a":1e2}`, `{"a":0.10}`, `{"a":1e21}`, `{"a":100000000000000000000}`,
	`{"a":1234567890123456}`, `{"a":-0.0}`, `{"a":0e5}`,
	`{"a":"\u00e9"}`, `{"a":"\/"}`, `{"a":"\u001F"}`, `{"a":"\b\f\t\r\n"}`, `{"a":"\u0008"}`, `{"a":"\ud83d\ude00"}`,
	`{"\u0061":1}`, `{"a\u0062":1,"aa":2}`,
	`{"security":1,"security":2}`, `{"a":1,"a":2}`, `{"a":1,"b":2,"a":3}`,
	// Rejected.
	`{"a":1,}`, `{"a":"\ud800"}`, `{"a":1e400}`, `{"a":9007199254740993}`, "{\"a\":\"\xff\"}",
	`{"a":NaN}`, `[`, `{"a"`, ``, `{"a":1}x`,
}

func TestDecodeCanonical(t *testing.T) {
	for _, c := range decodeCanonicalCases {
		for _, omit := range []string{"security", "", "a"} {
			checkDecodeCanonical(t, []byte(c), omit)
		}
	}
	checkDecodeCanonical(t, []byte(nested("[", "]", 64, `{"security":1}`)), "security")
	checkDecodeCanonical(t, []byte(nested("[", "]", 65, "1")), "security")
	deep := strings.Repeat(`{"a":`, 63) + `{"security":1,"z":2}` + strings.Repeat("}", 63)
	checkDecodeCanonical(t, []byte(deep), "security")
	huge := `{"a":"` + strings.Repeat("x", 1<<20) + `","security":{"sig":"` + strings.Repeat("é", 1000) + `"}}`
	checkDecodeCanonical(t, []byte(huge), "security")
	checkDecodeCanonical(t, []byte(strings.Replace(huge, "xxxx", `x\"x`, 1)), "security")
}

// TestDecodeCanonicalRandom compares the two routes on random documents
// written canonically (the copying route) and then disturbed (the writing
// route): reordered members, white space, escapes, number spellings.
func TestDecodeCanonicalRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 800; i++ {
		v := randomValue(rng, 0)
		if rng.IntN(2) == 0 {
			m := map[string]any{"security": map[string]any{"sig": randomString(rng)}}
			if obj, ok := v.(map[string]any); ok {
				for k, e := range obj {
					m[k] = e
				}
			}
			v = m
		}
		canon, err := jcs.CanonicalizeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		checkDecodeCanonical(t, canon, "security")
		checkDecodeCanonical(t, disturb(rng, canon), "security")
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(10)
	if depth > 3 {
		k = rng.IntN(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return randomNumber(rng)
	case 3, 4:
		return randomString(rng)
	case 5, 6:
		a := make([]any, rng.IntN(5))
		for i := range a {
			a[i] = randomValue(rng, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for n := rng.IntN(10); n > 0; n-- {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	}
}

func randomNumber(rng *rand.Rand) any {
	lits := []string{"0", "-1", "1e21", "1e-7", "0.000001", "123456789012345", "9007199254740992",
		"1.5", "-2.25e-300", "1.7976931348623157e308", "5e-324", "100", "3.14159"}
	if rng.IntN(2) == 0 {
		return rng.Int64N(1<<53) - 1<<52
	}
	if rng.IntN(3) == 0 {
		return rng.NormFloat64() * float64(rng.IntN(1<<20))
	}
	f, _ := jcs.Decode([]byte(lits[rng.IntN(len(lits))]))
	return f
}

func randomString(rng *rand.Rand) string {
	parts := []string{"a", "b", "security", "sig", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "\ufeff", "\uffff", "z", "0", " "}
	var b strings.Builder
	for n := rng.IntN(6); n > 0; n-- {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	if rng.IntN(20) == 0 {
		b.WriteString(strings.Repeat("x", rng.IntN(300)))
	}
	return b.String()
}

// disturb rewrites some bytes of a canonical document so that it means the
// same but is no longer canonical (or, now and then, breaks it).
func disturb(rng *rand.Rand, doc []byte) []byte {
	s := string(doc)
	switch rng.IntN(8) {
	case 0:
		return []byte(" " + s)
	case 1:
		return []byte(strings.Replace(s, ":", ": ", 1))
	case 2:
		return []byte(strings.Replace(s, "é", `\u00e9`, 1))
	case 3:
		return []byte(strings.Replace(s, `\n`, `\u000a`, 1))
	case 4:
		return []byte(strings.Replace(s, "0", "0.0", 1))
	case 5:
		return []byte(strings.Replace(s, `"security"`, `"s\u0065curity"`, 1))
	case 6:
		return []byte(strings.Replace(s, ",", ",\t", 1))
	default:
		// Swap two members of an object: reordered, or a duplicate.
		if i := strings.Index(s, `{"`); i >= 0 {
			if j := strings.Index(s[i:], `,"`); j > 0 {
				return []byte(s[:i+1] + s[i+j+1:] + "")
			}
		}
		return doc
	}
}

func FuzzDecodeCanonical(f *testing.F) {
	addSeeds(f)
	for _, c := range decodeCanonicalCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeCanonical(t, data, "security")
		checkDecodeCanonical(t, data, "a")
	})
}
