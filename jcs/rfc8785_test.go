package jcs_test

import (
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// RFC 8785 §3.2.2: the sample input, verbatim (it uses \u escapes, \/ and
// mixed-case hex on purpose).
const rfcSampleInput = `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`

// RFC 8785 §3.2.2 published canonical output. The € is the raw UTF-8 bytes
// E2 82 AC; U+000F stays escaped with lowercase hex.
const rfcSampleOutput = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"

// RFC 8785 §3.2.4 shows the same output as UTF-8 hex bytes.
const rfcSampleOutputHex = `
7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72
75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a
5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31
65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37
5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30
30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d`

func TestRFC8785Sample(t *testing.T) {
	want, err := hex.DecodeString(strings.Join(strings.Fields(rfcSampleOutputHex), ""))
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != rfcSampleOutput {
		t.Fatalf("test data inconsistent:\n hex: %q\n str: %q", want, rfcSampleOutput)
	}
	checkCanonical(t, rfcSampleInput, rfcSampleOutput)

	// The string value alone, written the literal way the RFC renders it.
	checkCanonical(t, `"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/"`,
		`"€$\u000f\nA'B\"\\\\\"/"`)
}

// RFC 8785 §3.2.3: member names sort by UTF-16 code units.
func TestRFC8785Sorting(t *testing.T) {
	const in = `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{" +
		`"\r":"Carriage Return",` +
		`"1":"One",` +
		"\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
		"\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\"," +
		"\"\uFB33\":\"Hebrew Letter Dalet With Dagesh\"" +
		"}"
	checkCanonical(t, in, want)

	// The RFC lists the property values in the order they must appear.
	got := mustCanonicalize(t, []byte(in))
	order := []string{"Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis",
		"Euro Sign", "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh"}
	last := -1
	for _, v := range order {
		i := strings.Index(string(got), `"`+v+`"`)
		if i <= last {
			t.Fatalf("%q out of order in %q", v, got)
		}
		last = i
	}
}

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
func TestRFC8785AppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string // "" means the value must be rejected
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // minus zero
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x7fffffffffffffff, ""}, // NaN
		{0x7ff0000000000000, ""}, // Infinity
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		t.Run(strings.ToUpper(hex.EncodeToString([]byte{
			byte(tt.bits >> 56), byte(tt.bits >> 48), byte(tt.bits >> 40), byte(tt.bits >> 32),
			byte(tt.bits >> 24), byte(tt.bits >> 16), byte(tt.bits >> 8), byte(tt.bits)})), func(t *testing.T) {
			got, err := jcs.FormatNumber(f)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("FormatNumber(%v) = %q, want error", f, got)
				}
				if _, err := jcs.CanonicalizeValue(f); !errors.Is(err, jcs.ErrNumber) {
					t.Fatalf("CanonicalizeValue(%v) error = %v, want ErrNumber", f, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FormatNumber(%v) = %q, %v; want %q", f, got, err, tt.want)
			}
			// Through the decoded-value route as well.
			c, err := jcs.CanonicalizeValue(f)
			if err != nil || string(c) != tt.want {
				t.Fatalf("CanonicalizeValue(%v) = %q, %v; want %q", f, c, err, tt.want)
			}
		})
	}
}
