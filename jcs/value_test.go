package jcs_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

func TestDecodeGenericValues(t *testing.T) {
	in := `{"a":1,"b":[],"c":{},"d":"x\u00e9\n","e":true,"f":false,"g":null,"h":1.50,"i":-0,"j":[1e2,{"k":[[]]}],"l":-12.5E-1}`
	v, err := jcs.Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": json.Number("1"),
		"b": []any{},
		"c": map[string]any{},
		"d": "x\u00e9\n",
		"e": true,
		"f": false,
		"g": nil,
		"h": json.Number("1.50"),
		"i": json.Number("-0"),
		"j": []any{json.Number("1e2"), map[string]any{"k": []any{[]any{}}}},
		"l": json.Number("-12.5E-1"),
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("Decode(%s)\n got: %#v\nwant: %#v", in, v, want)
	}
	m := v.(map[string]any)
	if b, ok := m["b"].([]any); !ok || b == nil {
		t.Errorf("empty array decoded as %#v, want non-nil []any{}", m["b"])
	}
	if c, ok := m["c"].(map[string]any); !ok || c == nil {
		t.Errorf("empty object decoded as %#v, want non-nil map[string]any{}", m["c"])
	}
	if _, ok := m["g"]; !ok {
		t.Errorf("null member dropped")
	}
}

func TestDecodeScalars(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{`null`, nil},
		{` true `, true},
		{`false`, false},
		{`"s"`, "s"},
		{`"\ud83d\ude00\/"`, "\U0001F600/"},
		{`0`, json.Number("0")},
		{`-0.0`, json.Number("-0.0")},
		{`1E+2`, json.Number("1E+2")},
		{`9007199254740991`, json.Number("9007199254740991")},
		{`12345678901234567890.0`, json.Number("12345678901234567890.0")},
		{`[]`, []any{}},
		{`{}`, map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, err := jcs.Decode([]byte(tt.in))
			if err != nil {
				t.Fatalf("Decode(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(v, tt.want) {
				t.Fatalf("Decode(%q) = %#v, want %#v", tt.in, v, tt.want)
			}
		})
	}
}

func TestCanonicalizeValueAccepts(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"nil", nil, `null`},
		{"true", true, `true`},
		{"false", false, `false`},
		{"string", "a\"\u00e9\n\x7f\u2028", "\"a\\\"\u00e9\\n\x7f\u2028\""},
		{"int", int(42), `42`},
		{"int8", int8(-128), `-128`},
		{"int16", int16(32767), `32767`},
		{"int32", int32(-2147483648), `-2147483648`},
		{"int64 max safe", int64(1<<53 - 1), `9007199254740991`},
		{"int64 min safe", int64(-(1<<53 - 1)), `-9007199254740991`},
		{"uint", uint(7), `7`},
		{"uint8", uint8(255), `255`},
		{"uint16", uint16(65535), `65535`},
		{"uint32", uint32(4294967295), `4294967295`},
		{"uint64 max safe", uint64(1<<53 - 1), `9007199254740991`},
		// Beyond 2^53-1 only integers whose digits are the canonical text of
		// their double pass, as for JSON text.
		{"int64 2^53", int64(1 << 53), `9007199254740992`},
		{"int64 -2^53", int64(-(1 << 53)), `-9007199254740992`},
		{"uint64 2^53", uint64(1 << 53), `9007199254740992`},
		{"uint64 1e19", uint64(10000000000000000000), `10000000000000000000`},
		{"float64", 1.5, `1.5`},
		{"float64 integer", 8542.0, `8542`},
		{"float64 2^53", float64(1 << 53), `9007199254740992`},
		{"float64 1e21", 1e21, `1e+21`},
		{"float64 -0", math.Copysign(0, -1), `0`},
		{"float32", float32(0.5), `0.5`},
		{"json.Number int", json.Number("10"), `10`},
		{"json.Number fraction", json.Number("4.50"), `4.5`},
		{"json.Number exponent", json.Number("1E30"), `1e+30`},
		{"json.Number -0", json.Number("-0"), `0`},
		{"json.Number double", json.Number("12345678901234567890.0"), `12345678901234567000`},
		{"RawMessage", rawMessage(` {"b":1, "a":[1.0,"\u00e9",{}]} `), "{\"a\":[1,\"\u00e9\",{}],\"b\":1}"},
		{"RawMessage scalar", rawMessage(`"\/"`), `"/"`},
		{"empty slice", []any{}, `[]`},
		{"empty map", map[string]any{}, `{}`},
		{"nested", map[string]any{"z": []any{1, "x", nil, false, map[string]any{}}, "a": json.Number("2e-3")},
			`{"a":0.002,"z":[1,"x",null,false,{}]}`},
		{"map ordering by UTF-16", map[string]any{"\uFB33": 1, "\U0001F600": 2, "\uE000": 3, "a": 4, "": 5, "\u00f6": 6},
			"{\"\":5,\"a\":4,\"\u00f6\":6,\"\U0001F600\":2,\"\uE000\":3,\"\uFB33\":1}"},
		{"raw inside slice", []any{rawMessage(`[3,2,1]`), rawMessage(`{"y":1,"x":2}`)}, `[[3,2,1],{"x":2,"y":1}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jcs.CanonicalizeValue(tt.v)
			if err != nil || string(got) != tt.want {
				t.Fatalf("CanonicalizeValue(%#v) = %q, %v; want %q", tt.v, got, err, tt.want)
			}
			d, err := jcs.DigestValue(tt.v)
			if err != nil || d != jcs.DigestCanonical([]byte(tt.want)) {
				t.Fatalf("DigestValue(%#v) = %q, %v; want digest of %q", tt.v, d, err, tt.want)
			}
			dst, err := (*jcs.Options)(nil).AppendValue([]byte("pre:"), tt.v)
			if err != nil || string(dst) != "pre:"+tt.want {
				t.Fatalf("AppendValue = %q, %v", dst, err)
			}
		})
	}
}

type action struct {
	Kind    string   `json:"kind"`
	Effects []string `json:"effects,omitempty"`
}

func TestCanonicalizeValueRejects(t *testing.T) {
	n := 1
	var nilPtr *int
	tests := []struct {
		name string
		v    any
		err  error
		path string
	}{
		{"struct", action{Kind: "x"}, jcs.ErrUnsupportedType, ""},
		{"pointer to struct", &action{Kind: "x"}, jcs.ErrUnsupportedType, ""},
		{"pointer to int", &n, jcs.ErrUnsupportedType, ""},
		{"nil pointer", nilPtr, jcs.ErrUnsupportedType, ""},
		{"channel", make(chan int), jcs.ErrUnsupportedType, ""},
		{"func", func() {}, jcs.ErrUnsupportedType, ""},
		{"complex", complex(1, 2), jcs.ErrUnsupportedType, ""},
		{"struct in map", map[string]any{"a": []any{1, action{}}}, jcs.ErrUnsupportedType, "/a/1"},
		{"channel in slice", []any{"x", make(chan struct{})}, jcs.ErrUnsupportedType, "/1"},
		{"int64 2^53+1", int64(1<<53 + 1), jcs.ErrNumber, ""},
		{"int64 -(2^53+1)", int64(-(1<<53 + 1)), jcs.ErrNumber, ""},
		{"int64 min", int64(math.MinInt64), jcs.ErrNumber, ""},
		{"int max", int(math.MaxInt), jcs.ErrNumber, ""},
		{"uint64 2^53+1", uint64(1<<53 + 1), jcs.ErrNumber, ""},
		{"uint64 2^63", uint64(1 << 63), jcs.ErrNumber, ""},
		{"uint64 max", uint64(math.MaxUint64), jcs.ErrNumber, ""},
		{"uint64 in map", map[string]any{"id": uint64(1<<53 + 1)}, jcs.ErrNumber, "/id"},
		{"NaN", math.NaN(), jcs.ErrNumber, ""},
		{"+Inf", math.Inf(1), jcs.ErrNumber, ""},
		{"float32 -Inf", float32(math.Inf(-1)), jcs.ErrNumber, ""},
		{"NaN in map", map[string]any{"a/b": math.NaN()}, jcs.ErrNumber, "/a~1b"},
		{"json.Number too big", json.Number("12345678901234567890"), jcs.ErrNumber, ""},
		{"json.Number overflow", json.Number("1e400"), jcs.ErrNumber, ""},
		{"json.Number underflow", json.Number("1e-400"), jcs.ErrNumber, ""},
		{"json.Number empty", json.Number(""), jcs.ErrSyntax, ""},
		{"json.Number word", json.Number("abc"), jcs.ErrSyntax, ""},
		{"json.Number leading zero", json.Number("01"), jcs.ErrSyntax, ""},
		{"json.Number space", json.Number(" 1"), jcs.ErrSyntax, ""},
		{"json.Number plus", json.Number("+1"), jcs.ErrSyntax, ""},
		{"json.Number NaN", json.Number("NaN"), jcs.ErrSyntax, ""},
		{"RawMessage duplicate", rawMessage(`{"a":1,"a":2}`), jcs.ErrDuplicateKey, "/a"},
		{"RawMessage escaped duplicate", rawMessage(`{"a":1,"\u0061":2}`), jcs.ErrDuplicateKey, "/a"},
		{"RawMessage two values", rawMessage(`1 2`), jcs.ErrSyntax, ""},
		{"RawMessage empty", rawMessage(``), jcs.ErrSyntax, ""},
		{"RawMessage invalid UTF-8", rawMessage("\"\xff\""), jcs.ErrInvalidUTF8, ""},
		{"RawMessage lone surrogate", rawMessage(`"\ud800"`), jcs.ErrLoneSurrogate, ""},
		{"RawMessage big integer", rawMessage(`[9007199254740993]`), jcs.ErrNumber, "/0"},
		{"RawMessage duplicate nested in map", map[string]any{"x": rawMessage(`{"a":1,"a":2}`)}, jcs.ErrDuplicateKey, "/x/a"},
		{"RawMessage error nested in slice", []any{0, rawMessage(`{"k":[true,NaN]}`)}, jcs.ErrNumber, "/1/k/1"},
		{"invalid UTF-8 string", "\xff", jcs.ErrInvalidUTF8, ""},
		{"encoded surrogate string", "\xed\xa0\x80", jcs.ErrInvalidUTF8, ""},
		{"truncated UTF-8 string", "ok\xe2\x82", jcs.ErrInvalidUTF8, ""},
		{"invalid UTF-8 string in slice", map[string]any{"a": []any{"ok", "\xc0\xaf"}}, jcs.ErrInvalidUTF8, "/a/1"},
		{"invalid UTF-8 map key", map[string]any{"\xff": 1}, jcs.ErrInvalidUTF8, ""},
		{"invalid UTF-8 nested map key", map[string]any{"o": map[string]any{"ok": 1, "\xed\xbf\xbf": 2}}, jcs.ErrInvalidUTF8, "/o"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jcs.CanonicalizeValue(tt.v)
			if !errors.Is(err, tt.err) {
				t.Fatalf("CanonicalizeValue(%#v) = %q, %v; want %v", tt.v, got, err, tt.err)
			}
			e := asJCSError(t, err)
			if e.Path != tt.path {
				t.Errorf("CanonicalizeValue(%#v): Path = %q, want %q (%v)", tt.v, e.Path, tt.path, err)
			}
			if e.Offset != -1 {
				t.Errorf("CanonicalizeValue(%#v): Offset = %d, want -1 for decoded values", tt.v, e.Offset)
			}
			if _, err := jcs.DigestValue(tt.v); !errors.Is(err, tt.err) {
				t.Errorf("DigestValue(%#v) error = %v, want %v", tt.v, err, tt.err)
			}
			dst, err := (*jcs.Options)(nil).AppendValue([]byte("pre:"), tt.v)
			if err == nil || string(dst) != "pre:" {
				t.Errorf("AppendValue(%#v) = %q, %v; want dst unchanged and an error", tt.v, dst, err)
			}
		})
	}
}

// TestRawMessageDepth: a json.RawMessage counts toward the depth limit from
// where it sits, exactly as the same JSON text would inside a document.
func TestRawMessageDepth(t *testing.T) {
	tests := []struct {
		name  string
		depth int
		v     any
		text  string // the same document as JSON text
	}{
		{"scalar raw at the limit", 1, []any{rawMessage(`1`)}, `[1]`},
		{"string raw at the limit", 2, []any{[]any{rawMessage(`"s"`)}}, `[["s"]]`},
		{"container raw within the limit", 2, []any{rawMessage(`[1]`)}, `[[1]]`},
		{"container raw beyond the limit", 2, []any{rawMessage(`[[1]]`)}, `[[[1]]]`},
		{"object raw beyond the limit", 2, map[string]any{"a": rawMessage(`{"b":{}}`)}, `{"a":{"b":{}}}`},
		{"top-level raw", 1, rawMessage(`{"a":1}`), `{"a":1}`},
		{"top-level raw beyond", 1, rawMessage(`{"a":[]}`), `{"a":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &jcs.Options{MaxDepth: tt.depth}
			want, wantErr := opts.Canonicalize([]byte(tt.text))
			got, err := opts.AppendValue(nil, tt.v)
			if (err == nil) != (wantErr == nil) || string(got) != string(want) {
				t.Fatalf("MaxDepth %d: AppendValue = %q, %v; Canonicalize(%s) = %q, %v",
					tt.depth, got, err, tt.text, want, wantErr)
			}
			if wantErr != nil && !errors.Is(err, jcs.ErrDepth) {
				t.Fatalf("AppendValue error %v, want ErrDepth", err)
			}
		})
	}
}

// TestEmptyValuesChangeDigest: empty arrays and false values are part of the
// signed content; dropping them (as omitempty would) must change the digest.
func TestEmptyValuesChangeDigest(t *testing.T) {
	v := map[string]any{"a": []any{}, "b": false}
	c, err := jcs.CanonicalizeValue(v)
	if err != nil || string(c) != `{"a":[],"b":false}` {
		t.Fatalf("CanonicalizeValue = %q, %v", c, err)
	}
	d1, err := jcs.DigestValue(v)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := jcs.Digest([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if d1 == d2 {
		t.Fatalf("digest of %s equals digest of {}: %s", c, d1)
	}
	d3, err := jcs.Digest([]byte(`{ "b" : false , "a" : [ ] }`))
	if err != nil || d3 != d1 {
		t.Fatalf("Digest(text) = %q, %v; DigestValue = %q", d3, err, d1)
	}
	// The struct route is refused rather than silently dropping members.
	if _, err := jcs.CanonicalizeValue(action{Kind: "x"}); !errors.Is(err, jcs.ErrUnsupportedType) {
		t.Fatalf("struct accepted: %v", err)
	}
}

// TestDecodeRoundTripCorpus: CanonicalizeValue(Decode(x)) == Canonicalize(x)
// for every valid document in the corpus, and DigestValue agrees with Digest.
func TestDecodeRoundTripCorpus(t *testing.T) {
	corpus := validCorpus(t)
	if len(corpus) < 200 {
		t.Fatalf("corpus has only %d documents", len(corpus))
	}
	for i, doc := range corpus {
		want, err := jcs.Canonicalize(doc)
		if err != nil {
			t.Fatalf("corpus[%d] %s: %v", i, clip(string(doc)), err)
		}
		v, err := jcs.Decode(doc)
		if err != nil {
			t.Fatalf("Decode(corpus[%d] %s): %v", i, clip(string(doc)), err)
		}
		got, err := jcs.CanonicalizeValue(v)
		if err != nil || string(got) != string(want) {
			t.Fatalf("corpus[%d] %s: CanonicalizeValue(Decode) = %s, %v\n%s", i, clip(string(doc)), clip(string(got)), err, diff(string(got), string(want)))
		}
		d1, err1 := jcs.Digest(doc)
		d2, err2 := jcs.DigestValue(v)
		if err1 != nil || err2 != nil || d1 != d2 || d1 != jcs.DigestCanonical(want) {
			t.Fatalf("corpus[%d]: Digest %q %v, DigestValue %q %v", i, d1, err1, d2, err2)
		}
	}
}
