package pyrepr

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestRepr(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{nil, "None"},
		{true, "True"},
		{false, "False"},
		{"jti", `'jti'`},
		{"it's", `"it's"`},
		{`a'b"c`, `'a\'b"c'`},
		{"l\n\t\r\x00\x7f", `'l\n\t\r\x00\x7f'`},
		{"\u00a0\u2028\U000e0001é", `'\xa0\u2028\U000e0001é'`},
		{"\xff", `'\xff'`},
		{json.Number("12345678901234567890"), "12345678901234567890"},
		{json.Number("-0"), "0"},
		{json.Number("1.50"), "1.5"},
		{json.Number("1e400"), "inf"},
		{1.0, "1.0"},
		{0.0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1e16, "1e+16"},
		{1e15, "1000000000000000.0"},
		{0.0001, "0.0001"},
		{0.00001, "1e-05"},
		{150.123, "150.123"},
		{math.NaN(), "nan"},
		{7, "7"},
		{[]any{"a", json.Number("1"), nil}, "['a', 1, None]"},
		{[]string{"notes.write", "x"}, "['notes.write', 'x']"},
		{map[string]any{"b": 1, "a": []any{}}, "{'a': [], 'b': 1}"},
		{&Object{Keys: []string{"b", "a"}, Values: []any{json.Number("1"), "x"}}, "{'b': 1, 'a': 'x'}"},
		{struct{}{}, "<struct {}>"},
	}
	for _, tt := range tests {
		if got := Repr(tt.v); got != tt.want {
			t.Errorf("Repr(%#v) = %s, want %s", tt.v, got, tt.want)
		}
	}
}

func TestReprDepth(t *testing.T) {
	var v any = "x"
	for range 100 {
		v = []any{v}
	}
	if got := Repr(v); !strings.Contains(got, "...") || len(got) > 200 {
		t.Errorf("deep value rendered as %q", got)
	}
}

func TestClipped(t *testing.T) {
	if got := Clipped("short", 10); got != "'short'" {
		t.Errorf("Clipped short = %s", got)
	}
	if got := Clipped(strings.Repeat("é", 50), 3); got != "'ééé...'" {
		t.Errorf("Clipped long = %s", got)
	}
}

func TestObjectGet(t *testing.T) {
	o := &Object{Keys: []string{"a"}, Values: []any{1}}
	if v, ok := o.Get("a"); !ok || v != 1 {
		t.Errorf("Get(a) = %v, %v", v, ok)
	}
	if _, ok := o.Get("b"); ok {
		t.Error("Get(b) found a missing key")
	}
}
