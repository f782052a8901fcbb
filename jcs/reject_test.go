package jcs_test

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// anyOffset marks a row whose byte offset is not asserted.
const anyOffset = -2

type rejectCase struct {
	name   string
	in     string
	err    error  // sentinel, matched with errors.Is
	path   string // RFC 6901 JSON Pointer
	offset int    // byte offset in the input, or anyOffset
}

var rejectCases = []rejectCase{
	// Duplicate member names (RFC 7493 §2.3).
	{"duplicate adjacent", `{"a":1,"a":2}`, jcs.ErrDuplicateKey, "/a", 7},
	{"duplicate via escape", `{"a":1,"\u0061":2}`, jcs.ErrDuplicateKey, "/a", 7},
	{"duplicate via escaped non-ASCII", `{"é":1,"\u00e9":2}`, jcs.ErrDuplicateKey, "/é", 8},
	{"duplicate via surrogate escape", "{\"\U0001F600\":1,\"\\ud83d\\ude00\":2}", jcs.ErrDuplicateKey, "/\U0001F600", 10},
	{"duplicate non-adjacent", `{"a":1,"b":2,"a":3}`, jcs.ErrDuplicateKey, "/a", 13},
	{"duplicate non-adjacent reversed", `{"b":1,"a":2,"b":3}`, jcs.ErrDuplicateKey, "/b", 13},
	{"duplicate at depth", `{"x":{"y":[1,{"k":true,"k":false}]}}`, jcs.ErrDuplicateKey, "/x/y/1/k", 23},
	{"duplicate in second array element", `[{"a":1},{"a":1,"a":1}]`, jcs.ErrDuplicateKey, "/1/a", 16},
	{"duplicate name with slash", `{"a/b":1,"a/b":2}`, jcs.ErrDuplicateKey, "/a~1b", 9},
	{"duplicate under name with tilde", `{"m~n":{"a":1,"a":2}}`, jcs.ErrDuplicateKey, "/m~0n/a", 14},
	{"duplicate empty name under ~1/", `{"~1/":{"":1,"":2}}`, jcs.ErrDuplicateKey, "/~01~1/", 13},
	{"duplicate empty name", `{"":1,"":2}`, jcs.ErrDuplicateKey, "/", 6},

	// Invalid UTF-8 (RFC 7493 §2.1).
	{"raw 0xff", "\"\xff\"", jcs.ErrInvalidUTF8, "", 1},
	{"raw 0xff in array", "[\"ok\",\"a\xffb\"]", jcs.ErrInvalidUTF8, "/1", 8},
	{"overlong slash", "{\"k\":\"\xc0\xaf\"}", jcs.ErrInvalidUTF8, "/k", 6},
	{"overlong NUL", "\"\xc0\x80\"", jcs.ErrInvalidUTF8, "", 1},
	{"encoded high surrogate", "\"\xed\xa0\x80\"", jcs.ErrInvalidUTF8, "", 1},
	{"encoded low surrogate", "\"\xed\xbf\xbf\"", jcs.ErrInvalidUTF8, "", 1},
	{"truncated 3-byte sequence", "\"\xe2\x82\"", jcs.ErrInvalidUTF8, "", 1},
	{"truncated 4-byte sequence", "\"a\xf0\x9f\x98\"", jcs.ErrInvalidUTF8, "", 2},
	{"truncated at end of input", "\"\xe2\x82", jcs.ErrInvalidUTF8, "", 1},
	{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", jcs.ErrInvalidUTF8, "", 1},
	{"lone continuation byte", "\"\x80\"", jcs.ErrInvalidUTF8, "", 1},
	{"invalid UTF-8 in name", "{\"\xff\":1}", jcs.ErrInvalidUTF8, "", 2},
	{"invalid byte outside strings", "[\xff]", jcs.ErrSyntax, "/0", 1},

	// Lone surrogates in escapes (RFC 7493 §2.1).
	{"high alone", `"\ud800"`, jcs.ErrLoneSurrogate, "", 1},
	{"low alone", `"\udc00"`, jcs.ErrLoneSurrogate, "", 1},
	{"high then non-surrogate escape", `"\ud800\u0041"`, jcs.ErrLoneSurrogate, "", 1},
	{"high then high", `"\ud800\ud800"`, jcs.ErrLoneSurrogate, "", 1},
	{"reversed pair", `"\ude00\ud83d"`, jcs.ErrLoneSurrogate, "", 1},
	{"high then text", `"\ud83dabcdef"`, jcs.ErrLoneSurrogate, "", 1},
	{"high then escaped backslash", `"\ud800\\udc00"`, jcs.ErrLoneSurrogate, "", 1},
	{"high then short escape", `"\ud800\n"`, jcs.ErrLoneSurrogate, "", 1},
	{"high at end after text", `"x\ud83d"`, jcs.ErrLoneSurrogate, "", 2},
	{"valid pair then high", `"\ud83d\ude00\ud83d"`, jcs.ErrLoneSurrogate, "", 13},
	{"lone surrogate in array", `["ok","\ud83d"]`, jcs.ErrLoneSurrogate, "/1", 7},
	{"lone surrogate in name", `{"\udfff":1}`, jcs.ErrLoneSurrogate, "", 2},
	{"lone surrogate at depth", `{"a":{"b":"\uDBFF\n"}}`, jcs.ErrLoneSurrogate, "/a/b", 11},

	// Numbers that are not interoperable (RFC 7493 §2.2, RFC 8785 §3.2.2.3).
	{"NaN", `NaN`, jcs.ErrNumber, "", 0},
	{"NaN in array", `[NaN]`, jcs.ErrNumber, "/0", 1},
	{"Infinity", `Infinity`, jcs.ErrNumber, "", 0},
	{"Infinity as member", `{"n":Infinity}`, jcs.ErrNumber, "/n", 5},
	{"-Infinity", `-Infinity`, jcs.ErrNumber, "", anyOffset},
	{"-Infinity in array", `[1,-Infinity]`, jcs.ErrNumber, "/1", anyOffset},
	{"1e400", `1e400`, jcs.ErrNumber, "", 0},
	{"-1e400", `-1e400`, jcs.ErrNumber, "", 0},
	{"1.8e308", `1.8e308`, jcs.ErrNumber, "", 0},
	{"1e400 as member", `{"n":1e400}`, jcs.ErrNumber, "/n", 5},
	{"1e-400", `1e-400`, jcs.ErrNumber, "", 0},
	{"-1e-400", `-1e-400`, jcs.ErrNumber, "", 0},
	{"2e-324 rounds to zero", `[0,2e-324]`, jcs.ErrNumber, "/1", 3},
	// Integer literals beyond ±(2^53-1) are refused unless their digits are
	// exactly the canonical text of the double they denote (see
	// TestLargeIntegerLiterals for the accepted ones).
	{"2^53+1", `9007199254740993`, jcs.ErrNumber, "", 0},
	{"-(2^53+1)", `-9007199254740993`, jcs.ErrNumber, "", 0},
	{"2^53+3", `9007199254740995`, jcs.ErrNumber, "", 0},
	{"2^63", `9223372036854775808`, jcs.ErrNumber, "", 0},
	{"20 digits", `12345678901234567890`, jcs.ErrNumber, "", 0},
	{"-20 digits", `-12345678901234567890`, jcs.ErrNumber, "", 0},
	{"1e20+1 written as integer", `[1,100000000000000000001]`, jcs.ErrNumber, "/1", 3},
	{"1e21 written as integer", `1000000000000000000000`, jcs.ErrNumber, "", 0},
	{"big integer at depth", `{"a":[{"id":18446744073709551615}]}`, jcs.ErrNumber, "/a/0/id", 12},

	// RFC 8259 syntax.
	{"trailing garbage", `[1] x`, jcs.ErrSyntax, "", 4},
	{"two documents", `{} {}`, jcs.ErrSyntax, "", 3},
	{"two strings", `"a" "b"`, jcs.ErrSyntax, "", 4},
	{"trailing comma in array", `[1,]`, jcs.ErrSyntax, "/1", 3},
	{"trailing comma in object", `{"a":1,}`, jcs.ErrSyntax, "", 7},
	{"missing comma in array", `[1 2]`, jcs.ErrSyntax, "/0", 3},
	{"missing colon", `{"a" 1}`, jcs.ErrSyntax, "/a", 5},
	{"missing value", `{"a":}`, jcs.ErrSyntax, "/a", 5},
	{"missing comma in object", `{"a":1 "b":2}`, jcs.ErrSyntax, "/a", 7},
	{"leading zero", `01`, jcs.ErrSyntax, "", 1},
	{"double zero", `00`, jcs.ErrSyntax, "", 1},
	{"negative leading zero", `-01`, jcs.ErrSyntax, "", 2},
	{"plus sign", `+1`, jcs.ErrSyntax, "", 0},
	{"leading dot", `.5`, jcs.ErrSyntax, "", 0},
	{"trailing dot", `1.`, jcs.ErrSyntax, "", 2},
	{"dot before exponent", `1.e5`, jcs.ErrSyntax, "", 2},
	{"bare exponent", `1e`, jcs.ErrSyntax, "", 2},
	{"signed bare exponent", `1e+`, jcs.ErrSyntax, "", 3},
	{"lone minus", `-`, jcs.ErrSyntax, "", 1},
	{"double minus", `--1`, jcs.ErrSyntax, "", 1},
	{"hex number", `0x10`, jcs.ErrSyntax, "", 1},
	{"trailing dot in array", `[1.]`, jcs.ErrSyntax, "/0", 3},
	{"unquoted name", `{a:1}`, jcs.ErrSyntax, "", 1},
	{"single-quoted name", `{'a':1}`, jcs.ErrSyntax, "", 1},
	{"single-quoted value", `['a']`, jcs.ErrSyntax, "/0", 1},
	{"number as name", `{1:1}`, jcs.ErrSyntax, "", 1},
	{"raw tab in string", "\"a\tb\"", jcs.ErrSyntax, "", 2},
	{"raw newline in string", "\"line\nbreak\"", jcs.ErrSyntax, "", 5},
	{"raw NUL in string", "\"\x00\"", jcs.ErrSyntax, "", 1},
	{"raw U+001F in string", "\"\x1f\"", jcs.ErrSyntax, "", 1},
	{"raw control in name", "{\"a\x01\":1}", jcs.ErrSyntax, "", 3},
	{"bad escape x", `"\x41"`, jcs.ErrSyntax, "", 1},
	{"bad escape quote", `"\'"`, jcs.ErrSyntax, "", 1},
	{"bad escape U", `"\U0041"`, jcs.ErrSyntax, "", 1},
	{"short u escape", `"\u12"`, jcs.ErrSyntax, "", 1},
	{"non-hex u escape", `"\u12G4"`, jcs.ErrSyntax, "", 1},
	{"unterminated string", `"abc`, jcs.ErrSyntax, "", 4},
	{"unterminated after backslash", `"abc\`, jcs.ErrSyntax, "", 4},
	{"empty input", ``, jcs.ErrSyntax, "", 0},
	{"whitespace only", " \t\r\n", jcs.ErrSyntax, "", 4},
	{"vertical tab is not whitespace", "\v1", jcs.ErrSyntax, "", 0},
	{"non-breaking space is not whitespace", "\u00a01", jcs.ErrSyntax, "", 0},
	{"byte order mark", "\xef\xbb\xbf{}", jcs.ErrSyntax, "", 0},
	{"truncated literal", `tru`, jcs.ErrSyntax, "", 0},
	{"truncated null", `nul`, jcs.ErrSyntax, "", 0},
	{"capitalised literal", `True`, jcs.ErrSyntax, "", 0},
	{"literal with suffix", `nulll`, jcs.ErrSyntax, "", 4},
	{"None", `[None]`, jcs.ErrSyntax, "/0", 1},
	{"unclosed array", `[`, jcs.ErrSyntax, "/0", 1},
	{"unclosed array after element", `[1,2`, jcs.ErrSyntax, "/1", 4},
	{"unclosed object", `{`, jcs.ErrSyntax, "", 1},
	{"unclosed object after member", `{"a":1`, jcs.ErrSyntax, "/a", 6},
	{"extra closing brace", `{"a":1}}`, jcs.ErrSyntax, "", 7},
	{"lone closing bracket", `]`, jcs.ErrSyntax, "", 0},
	{"leading comma in object", `{,}`, jcs.ErrSyntax, "", 1},
	{"leading comma in array", `[,1]`, jcs.ErrSyntax, "/0", 1},
	{"comment", `/* c */ 1`, jcs.ErrSyntax, "", 0},
	{"line comment after value", `1 // c`, jcs.ErrSyntax, "", 2},
}

// checkReject asserts err matches tt: sentinel, path, offset, and an error
// string that names the path.
func checkReject(t *testing.T, what string, err error, tt rejectCase) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s(%q) succeeded, want %v", what, tt.in, tt.err)
	}
	if !errors.Is(err, tt.err) {
		t.Fatalf("%s(%q) error = %v, want errors.Is %v", what, tt.in, err, tt.err)
	}
	e := asJCSError(t, err)
	if e.Err != tt.err {
		t.Errorf("%s(%q): Error.Err = %v, want %v", what, tt.in, e.Err, tt.err)
	}
	if e.Path != tt.path {
		t.Errorf("%s(%q): Path = %q, want %q (error: %v)", what, tt.in, e.Path, tt.path, err)
	}
	if tt.offset != anyOffset && e.Offset != tt.offset {
		t.Errorf("%s(%q): Offset = %d, want %d (error: %v)", what, tt.in, e.Offset, tt.offset, err)
	}
	msg := err.Error()
	wantInMsg := "document root"
	if tt.path != "" {
		wantInMsg = strconv.Quote(tt.path)
	}
	if !strings.Contains(msg, wantInMsg) {
		t.Errorf("%s(%q): error string %q does not mention %s", what, tt.in, msg, wantInMsg)
	}
	if !strings.HasPrefix(msg, tt.err.Error()) {
		t.Errorf("%s(%q): error string %q does not start with %q", what, tt.in, msg, tt.err.Error())
	}
}

func TestRejectCanonicalize(t *testing.T) {
	for _, tt := range rejectCases {
		t.Run(tt.name, func(t *testing.T) {
			out, err := jcs.Canonicalize([]byte(tt.in))
			if len(out) != 0 {
				t.Errorf("Canonicalize(%q) returned output %q with error", tt.in, out)
			}
			checkReject(t, "Canonicalize", err, tt)

			dst := []byte("prefix")
			out, err = (*jcs.Options)(nil).Append(dst, []byte(tt.in))
			checkReject(t, "Append", err, tt)
			if !bytes.Equal(out, []byte("prefix")) {
				t.Errorf("Append(%q) returned %q on error, want dst unchanged", tt.in, out)
			}

			d, err := jcs.Digest([]byte(tt.in))
			checkReject(t, "Digest", err, tt)
			if d != "" {
				t.Errorf("Digest(%q) = %q with error", tt.in, d)
			}
		})
	}
}

func TestRejectDecode(t *testing.T) {
	for _, tt := range rejectCases {
		t.Run(tt.name, func(t *testing.T) {
			v, err := jcs.Decode([]byte(tt.in))
			if v != nil {
				t.Errorf("Decode(%q) returned %#v with error", tt.in, v)
			}
			checkReject(t, "Decode", err, tt)
		})
	}
}

// TestRejectRawMessage feeds every rejected document through
// CanonicalizeValue as json.RawMessage, nested under a member name; the
// sentinel must be the same and the path must start at the member.
func TestRejectRawMessage(t *testing.T) {
	for _, tt := range rejectCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jcs.CanonicalizeValue(map[string]any{"raw": rawMessage(tt.in)})
			if !errors.Is(err, tt.err) {
				t.Fatalf("CanonicalizeValue(RawMessage(%q)) error = %v, want %v", tt.in, err, tt.err)
			}
			e := asJCSError(t, err)
			if want := "/raw" + tt.path; e.Path != want {
				t.Errorf("CanonicalizeValue(RawMessage(%q)): Path = %q, want %q", tt.in, e.Path, want)
			}
			if e.Offset != -1 {
				t.Errorf("CanonicalizeValue(RawMessage(%q)): Offset = %d, want -1", tt.in, e.Offset)
			}
		})
	}
}

func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestDepthLimit(t *testing.T) {
	tests := []struct {
		name   string
		opts   *jcs.Options
		in     string
		ok     bool
		path   string
		offset int
	}{
		{"64 arrays", nil, nested("[", "]", 64, "1"), true, "", 0},
		{"64 empty arrays", nil, nested("[", "]", 63, "[]"), true, "", 0},
		{"65 arrays", nil, nested("[", "]", 65, "1"), false, strings.Repeat("/0", 64), 64},
		{"65 arrays, innermost empty", nil, nested("[", "]", 64, "[]"), false, strings.Repeat("/0", 64), 64},
		{"64 objects", nil, nested(`{"a":`, "}", 64, "1"), true, "", 0},
		{"65 objects", nil, nested(`{"a":`, "}", 65, "1"), false, strings.Repeat("/a", 64), 64 * 5},
		{"65 mixed", nil, nested(`[{"k":`, "}]", 32, `[]`), false, strings.Repeat("/0/k", 32), 32 * 6},
		{"64 mixed", nil, nested(`[{"k":`, "}]", 32, `1`), true, "", 0},
		{"1000 arrays", nil, nested("[", "]", 1000, ""), false, strings.Repeat("/0", 64), 64},
		{"zero MaxDepth means default", &jcs.Options{}, nested("[", "]", 64, "1"), true, "", 0},
		{"zero MaxDepth means default, 65", &jcs.Options{}, nested("[", "]", 65, "1"), false, strings.Repeat("/0", 64), 64},
		{"MaxDepth 3, 3 arrays", &jcs.Options{MaxDepth: 3}, `[[[1]]]`, true, "", 0},
		{"MaxDepth 3, 4 arrays", &jcs.Options{MaxDepth: 3}, `[[[[1]]]]`, false, "/0/0/0", 3},
		{"MaxDepth 3, 4 objects", &jcs.Options{MaxDepth: 3}, `{"a":{"b":{"c":{}}}}`, false, "/a/b/c", 15},
		{"MaxDepth 3, siblings at depth 3", &jcs.Options{MaxDepth: 3}, `[[[1],[2]],{"a":[3]}]`, true, "", 0},
		{"MaxDepth 1, scalar", &jcs.Options{MaxDepth: 1}, `"deep"`, true, "", 0},
		{"MaxDepth 1, flat", &jcs.Options{MaxDepth: 1}, `[1,"x",{}]`, false, "/2", 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.opts.Canonicalize([]byte(tt.in))
			v, derr := tt.opts.Decode([]byte(tt.in))
			if tt.ok {
				if err != nil || derr != nil {
					t.Fatalf("Canonicalize error %v, Decode error %v; want success", err, derr)
				}
				if want := strings.Join(strings.Fields(tt.in), ""); string(out) != want {
					t.Fatalf("Canonicalize = %s, want %s", clip(string(out)), clip(want))
				}
				c, err := tt.opts.AppendValue(nil, v)
				if err != nil || !bytes.Equal(c, out) {
					t.Fatalf("AppendValue(Decode) = %s, %v; want %s", clip(string(c)), err, clip(string(out)))
				}
				return
			}
			rc := rejectCase{in: tt.in, err: jcs.ErrDepth, path: tt.path, offset: tt.offset}
			checkReject(t, "Canonicalize", err, rc)
			checkReject(t, "Decode", derr, rc)
		})
	}
}

// TestDepthLimitValues checks the depth limit for values built in Go.
func TestDepthLimitValues(t *testing.T) {
	build := func(n int) any {
		var v any = "leaf"
		for range n {
			v = []any{v}
		}
		return v
	}
	if _, err := jcs.CanonicalizeValue(build(64)); err != nil {
		t.Fatalf("64 nested []any: %v", err)
	}
	_, err := jcs.CanonicalizeValue(build(65))
	checkReject(t, "CanonicalizeValue", err, rejectCase{in: "65 nested []any", err: jcs.ErrDepth,
		path: strings.Repeat("/0", 64), offset: -1})
	_, err = (&jcs.Options{MaxDepth: 2}).AppendValue(nil, map[string]any{"a": map[string]any{"b": []any{}}})
	checkReject(t, "AppendValue", err, rejectCase{in: "3 nested", err: jcs.ErrDepth, path: "/a/b", offset: -1})
}

func TestSizeLimit(t *testing.T) {
	small := &jcs.Options{MaxSize: 10}
	if out, err := small.Canonicalize([]byte(`[1,2,3,45]`)); err != nil || string(out) != `[1,2,3,45]` {
		t.Fatalf("10-byte document under MaxSize 10: %q, %v", out, err)
	}
	if _, err := small.Decode([]byte(`[1,2,3,45]`)); err != nil {
		t.Fatalf("Decode 10-byte document under MaxSize 10: %v", err)
	}
	tooBig := rejectCase{in: `[1,2,3,4,5]`, err: jcs.ErrSize, path: "", offset: 10}
	_, err := small.Canonicalize([]byte(tooBig.in))
	checkReject(t, "Canonicalize", err, tooBig)
	_, err = small.Digest([]byte(tooBig.in))
	checkReject(t, "Digest", err, tooBig)
	_, err = small.Decode([]byte(tooBig.in))
	checkReject(t, "Decode", err, tooBig)
	_, err = small.AppendValue(nil, map[string]any{"r": rawMessage(tooBig.in)})
	if !errors.Is(err, jcs.ErrSize) {
		t.Fatalf("AppendValue with an oversized RawMessage: %v, want ErrSize", err)
	}

	// The default limit applies to the package-level functions.
	at := append(bytes.Repeat([]byte(" "), jcs.DefaultMaxSize-1), '1')
	if out, err := jcs.Canonicalize(at); err != nil || string(out) != "1" {
		t.Fatalf("document of exactly DefaultMaxSize bytes: %q, %v", out, err)
	}
	over := append(at, ' ')
	_, err = jcs.Canonicalize(over)
	checkReject(t, "Canonicalize", err, rejectCase{in: "DefaultMaxSize+1 bytes", err: jcs.ErrSize, offset: jcs.DefaultMaxSize})
	_, err = jcs.Decode(over)
	checkReject(t, "Decode", err, rejectCase{in: "DefaultMaxSize+1 bytes", err: jcs.ErrSize, offset: jcs.DefaultMaxSize})
}

// TestErrorPathEscaping checks RFC 6901 escaping of "~" and "/" in paths.
func TestErrorPathEscaping(t *testing.T) {
	tests := []struct{ in, path string }{
		{`{"a/b":NaN}`, "/a~1b"},
		{`{"a~b":NaN}`, "/a~0b"},
		{`{"~1":NaN}`, "/~01"},
		{`{"/~":NaN}`, "/~1~0"},
		{`{"~~//":NaN}`, "/~0~0~1~1"},
		{`{"":NaN}`, "/"},
		{`{"":{"":NaN}}`, "//"},
		{`{"a\/b":NaN}`, "/a~1b"},
		{`{"\u007e":NaN}`, "/~0"},
		{`{"é \"q\"":NaN}`, `/é "q"`},
		{`{"0":[{"1":[NaN]}]}`, "/0/0/1/0"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := jcs.Canonicalize([]byte(tt.in))
			checkReject(t, "Canonicalize", err, rejectCase{in: tt.in, err: jcs.ErrNumber, path: tt.path, offset: anyOffset})
			_, err = jcs.Decode([]byte(tt.in))
			checkReject(t, "Decode", err, rejectCase{in: tt.in, err: jcs.ErrNumber, path: tt.path, offset: anyOffset})
		})
	}
}

// TestLargeIntegerLiterals: an integer literal beyond ±(2^53-1) is accepted
// exactly when its digits are the canonical (ECMAScript) text of the double it
// denotes, so that every canonical output is itself valid input. Appendix B of
// RFC 8785 lists 9007199254740992 and 295147905179352830000 as outputs.
func TestLargeIntegerLiterals(t *testing.T) {
	for _, in := range []string{
		"9007199254740992", "-9007199254740992", "9007199254740994", "18014398509481984",
		"100000000000000000000", "-100000000000000000000", "295147905179352830000",
		"999999999999999900000", "18446744073709552000", "1152921504606847000", "10000000000000000",
	} {
		t.Run(in, func(t *testing.T) {
			checkCanonical(t, in, in)
			checkCanonical(t, `{"n":[`+in+`]}`, `{"n":[`+in+`]}`)
		})
	}
}
