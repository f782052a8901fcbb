package jcs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

func TestStringEscaping(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", `"hello"`, `"hello"`},
		{"empty", `""`, `""`},
		{"quote", `"a\"b"`, `"a\"b"`},
		{"backslash", `"a\\b"`, `"a\\b"`},
		{"solidus escaped in input", `"a\/b"`, `"a/b"`},
		{"solidus raw", `"a/b"`, `"a/b"`},
		{"short forms", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{"short forms from u-escapes", `"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{"NUL", `"\u0000"`, `"\u0000"`},
		{"U+0001", `"\u0001"`, `"\u0001"`},
		{"U+000B lowercase hex", `"\u000B"`, `"\u000b"`},
		{"U+000E", `"\u000e"`, `"\u000e"`},
		{"U+001F", `"\u001F"`, `"\u001f"`},
		{"U+001A", `"\u001a"`, `"\u001a"`},
		{"space not escaped", `"\u0020"`, `" "`},
		{"quote from u-escape", `"\u0022"`, `"\""`},
		{"backslash from u-escape", `"\u005C"`, `"\\"`},
		{"solidus from u-escape", `"\u002f"`, `"/"`},
		{"HTML characters raw", `"<a href=\"x\">&amp;</a>"`, `"<a href=\"x\">&amp;</a>"`},
		{"HTML characters from escapes", `"\u003c\u003E\u0026"`, `"<>&"`},
		{"DEL raw", "\"\x7f\"", "\"\x7f\""},
		{"DEL from escape", `"\u007f"`, "\"\x7f\""},
		{"U+0080 raw", `"\u0080"`, "\"\u0080\""},
		{"U+009F raw", `"\u009f"`, "\"\u009f\""},
		{"U+2028 raw", `"\u2028"`, "\"\u2028\""},
		{"U+2029 raw", "\"\u2029\"", "\"\u2029\""},
		{"escaped e-acute", `"caf\u00e9"`, "\"caf\u00e9\""},
		{"raw e-acute", "\"caf\u00e9\"", "\"caf\u00e9\""},
		{"euro escaped", `"\u20AC"`, "\"\u20ac\""},
		{"BOM char inside string", `"\ufeff"`, "\"\ufeff\""},
		{"U+FFFD escaped", `"\ufffd"`, "\"\ufffd\""},
		{"U+FFFF escaped", `"\uffff"`, "\"\uffff\""},
		{"non-BMP raw", "\"\U0001F600\"", "\"\U0001F600\""},
		{"non-BMP from surrogate escapes", `"\ud83d\ude00"`, "\"\U0001F600\""},
		{"non-BMP uppercase escapes", `"\uD83D\uDE00"`, "\"\U0001F600\""},
		{"U+10000", `"\ud800\udc00"`, "\"\U00010000\""},
		{"U+10FFFF", `"\udbff\udfff"`, "\"\U0010FFFF\""},
		{"mixed", `"\ta\u00e9\"\\/\ud83d\ude00\u0001z"`, "\"\\ta\u00e9\\\"\\\\/\U0001F600\\u0001z\""},
		{"escape at start and end", `"\nx\n"`, `"\nx\n"`},
		{"only escapes", `"\"\"\\\\"`, `"\"\"\\\\"`},
		{"in object name", `{"a\u0000\/b":"\u00e9"}`, "{\"a\\u0000/b\":\"\u00e9\"}"},
		{"in array", `["\/", "\u000f", "\u007F"]`, "[\"/\",\"\\u000f\",\"\x7f\"]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCanonical(t, tt.in, tt.want) })
	}
}

// TestControlCharacters checks every U+0000..U+001F escape and the characters
// just above, through both input routes (\u escape in JSON, raw Go string).
func TestControlCharacters(t *testing.T) {
	short := map[rune]string{'\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	for c := rune(0); c < 0x80; c++ {
		want := string(c)
		switch {
		case short[c] != "":
			want = short[c]
		case c < 0x20:
			want = fmt.Sprintf(`\u%04x`, c)
		case c == '"':
			want = `\"`
		case c == '\\':
			want = `\\`
		}
		t.Run(fmt.Sprintf("U+%04X", c), func(t *testing.T) {
			checkCanonical(t, fmt.Sprintf(`"\u%04X"`, c), `"`+want+`"`)
			checkCanonical(t, fmt.Sprintf(`"\u%04x"`, c), `"`+want+`"`)
			got, err := jcs.CanonicalizeValue(string(c))
			if err != nil || string(got) != `"`+want+`"` {
				t.Fatalf("CanonicalizeValue(%q) = %q, %v; want %q", string(c), got, err, `"`+want+`"`)
			}
			if c >= 0x20 && c != '"' && c != '\\' {
				checkCanonical(t, `"`+string(c)+`"`, `"`+string(c)+`"`)
			}
		})
	}
}

// TestLongStrings exercises strings long enough to cross any internal
// buffering, with escapes spread through them.
func TestLongStrings(t *testing.T) {
	var in, want strings.Builder
	in.WriteByte('"')
	want.WriteByte('"')
	for i := range 5000 {
		switch i % 7 {
		case 0:
			in.WriteString(`\n`)
			want.WriteString(`\n`)
		case 1:
			in.WriteString(`\u00e9`)
			want.WriteString("\u00e9")
		case 2:
			in.WriteString(`\ud83d\ude00`)
			want.WriteString("\U0001F600")
		case 3:
			in.WriteString(`\/`)
			want.WriteString(`/`)
		case 4:
			in.WriteString(`\u001b`)
			want.WriteString(`\u001b`)
		default:
			in.WriteString("abc")
			want.WriteString("abc")
		}
	}
	in.WriteByte('"')
	want.WriteByte('"')
	checkCanonical(t, in.String(), want.String())
	checkCanonical(t, `{"`+strings.Repeat("k", 10000)+`":"`+strings.Repeat("\u00e9", 10000)+`"}`,
		`{"`+strings.Repeat("k", 10000)+`":"`+strings.Repeat("\u00e9", 10000)+`"}`)
}
