package assets

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in    string
		want  string // String(); "" means an error
		scale int
	}{
		{"0", "0", 0},
		{"-0", "0", 0},
		{"0.0", "0", 0},
		{"100", "100", 0},
		{"100.50", "100.5", 1},
		{"100.00", "100", 0},
		{"1.005e2", "100.5", 1},
		{"1E+2", "100", 0},
		{"1e-8", "0.00000001", 8},
		{"1e-9", "0.000000001", 9},
		{"0.12345678", "0.12345678", 8},
		{"-3", "-3", 0},
		{"-0.5", "-0.5", 1},
		{"150.123", "150.123", 3},
		{"0.30000000000000004", "0.30000000000000004", 17},
		{"12345678901234567890123456789.12", "12345678901234567890123456789.12", 2},
		{"1e308", "1" + strings.Repeat("0", 308), 0},
		{"1e309", "", 0},  // more integer digits than any float64
		{"1e-401", "", 0}, // more decimals than MaxAmountScale
		{"1e-399", "0." + strings.Repeat("0", 398) + "1", 399},
		{"0e999999999999999999999", "0", 0},
		{"1e99999999999999999999", "", 0}, // clamped exponent, no overflow
		{"", "", 0},
		{"+1", "", 0},
		{"01", "", 0},
		{".5", "", 0},
		{"5.", "", 0},
		{"1e", "", 0},
		{"1e+", "", 0},
		{"0x10", "", 0},
		{"NaN", "", 0},
		{"Infinity", "", 0},
		{" 1", "", 0},
		{"1 ", "", 0},
		{"1,5", "", 0},
		{"--1", "", 0},
		{"١", "", 0}, // Arabic-Indic digit
		{strings.Repeat("1", MaxAmountTextLength+1), "", 0},
	}
	for _, tt := range tests {
		got, err := ParseAmount(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseAmount(%q) = %s, want an error", tt.in, got)
			} else if !errors.Is(err, ErrInvalidAmount) {
				t.Errorf("ParseAmount(%q) error %v does not wrap ErrInvalidAmount", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAmount(%q): %v", tt.in, err)
			continue
		}
		if got.String() != tt.want || got.Scale() != tt.scale {
			t.Errorf("ParseAmount(%q) = %s (scale %d), want %s (scale %d)", tt.in, got, got.Scale(), tt.want, tt.scale)
		}
		back, err := ParseAmount(got.String())
		if err != nil || !back.Equal(got) {
			t.Errorf("String() of %q does not parse back: %v", tt.in, err)
		}
	}
}

// tenth is a variable so that 0.1+0.2 is computed in float64 at run time
// (constant expressions are exact in Go).
var tenth = 0.1

func TestAmountFromJSON(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string // "" means an error
	}{
		{"float literal 100.50", 100.50, "100.5"},
		{"float 0.1+0.2", tenth + 2*tenth, "0.30000000000000004"},
		{"float 1e-8", 1e-8, "0.00000001"},
		{"float 0.07", 0.07, "0.07"},
		{"float max", math.MaxFloat64, "17976931348623157" + strings.Repeat("0", 292)},
		{"float smallest denormal", math.SmallestNonzeroFloat64, "0." + strings.Repeat("0", 323) + "5"},
		{"float NaN", math.NaN(), ""},
		{"float +Inf", math.Inf(1), ""},
		{"float32", float32(0.1), "0.1"},
		{"int", 42, "42"},
		{"int64 min", int64(math.MinInt64), "-9223372036854775808"},
		{"uint64 max", uint64(math.MaxUint64), "18446744073709551615"},
		{"json.Number exact", json.Number("150.12300"), "150.123"},
		{"json.Number bad", json.Number("1.2.3"), ""},
		{"string refused", "100.00", ""},
		{"bool refused", true, ""},
		{"null refused", nil, ""},
		{"object refused", map[string]any{}, ""},
	}
	for _, tt := range tests {
		got, err := AmountFromJSON(tt.in)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s: got %s, want an error", tt.name, got)
		case tt.want == "" && !errors.Is(err, ErrInvalidAmount):
			t.Errorf("%s: error %v does not wrap ErrInvalidAmount", tt.name, err)
		case tt.want != "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && got.String() != tt.want:
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestAmountArithmetic(t *testing.T) {
	a, b := MustParseAmount("0.1"), MustParseAmount("0.2")
	if sum := a.Add(b); sum.String() != "0.3" || !sum.Equal(MustParseAmount("0.30")) {
		t.Errorf("0.1 + 0.2 = %s, want exactly 0.3", sum)
	}
	if d := a.Sub(b); d.String() != "-0.1" || d.Sign() != -1 {
		t.Errorf("0.1 - 0.2 = %s", d)
	}
	if z := a.Sub(a); !z.IsZero() || z.String() != "0" || z.Scale() != 0 {
		t.Errorf("a - a = %s (scale %d)", z, z.Scale())
	}
	if MustParseAmount("100.5").Cmp(MustParseAmount("100.50")) != 0 {
		t.Error("100.5 != 100.50")
	}
	if MustParseAmount("-1").Cmp(MustParseAmount("0.00000001")) != -1 {
		t.Error("-1 not below 1e-8")
	}
	var zero Amount
	if zero.String() != "0" || zero.Add(a).String() != "0.1" || zero.Cmp(Amount{}) != 0 {
		t.Error("zero value is not usable as 0")
	}
	if r := MustParseAmount("2.5").Rat(); r.RatString() != "5/2" {
		t.Errorf("Rat = %s", r.RatString())
	}
	// Operands are not modified.
	x := MustParseAmount("1.10")
	_ = x.Add(MustParseAmount("5"))
	_ = x.Sub(MustParseAmount("5"))
	if x.String() != "1.1" {
		t.Errorf("operand changed to %s", x)
	}
}

func TestAmountStringFixedAndJSON(t *testing.T) {
	for in, want := range map[string]string{"100.5": "100.50", "3": "3.00", "0.01": "0.01", "-2.1": "-2.10"} {
		if got, err := MustParseAmount(in).StringFixed(2); err != nil || got != want {
			t.Errorf("StringFixed(%s, 2) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, _ := MustParseAmount("7").StringFixed(0); got != "7" {
		t.Errorf("StringFixed(7, 0) = %q", got)
	}
	if _, err := MustParseAmount("1.005").StringFixed(2); !errors.Is(err, ErrPrecision) {
		t.Errorf("StringFixed rounds instead of failing: %v", err)
	}
	var v struct {
		A Amount `json:"a"`
		B Amount `json:"b"`
	}
	if err := json.Unmarshal([]byte(`{"a": 1.10, "b": "0.00000001"}`), &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	if string(out) != `{"a":1.1,"b":0.00000001}` {
		t.Errorf("round trip = %s", out)
	}
	for _, bad := range []string{`{"a": "x"}`, `{"a": true}`, `{"a": "1e-9999"}`, `{"a": "\u0031"}`} {
		var w struct{ A Amount }
		err := json.Unmarshal([]byte(bad), &w)
		if bad == `{"a": "\u0031"}` {
			if err != nil || w.A.String() != "1" {
				t.Errorf("%s: %v %s", bad, err, w.A)
			}
			continue
		}
		if err == nil {
			t.Errorf("Unmarshal(%s) accepted %s", bad, w.A)
		}
	}
}

func TestCheckAmount(t *testing.T) {
	tests := []struct {
		t      AssetType
		amount string
		err    error
	}{
		{Currency, "100.5", nil},
		{Currency, "0.01", nil},
		{Currency, "150.123", ErrPrecision},
		{Currency, "0.30000000000000004", ErrPrecision},
		{Currency, "99999999999999999999999999.99", nil},
		{Currency, "0", ErrInvalidAmount},
		{Currency, "-5", ErrInvalidAmount},
		{Token, "0.00000001", nil},
		{Token, "0.000000001", ErrPrecision},
		{Token, "0.12345678", nil},
		{Entitlement, "0.5", nil},
		{Entitlement, "3", nil},
		{Entitlement, "0.125", ErrPrecision},
		{ServiceUnit, "0.0001", nil},
		{ServiceUnit, "0.00001", ErrPrecision},
		{AssetType("crypto"), "1", ErrInvalidAmount},
	}
	for _, tt := range tests {
		err := CheckAmount(tt.t, MustParseAmount(tt.amount))
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("CheckAmount(%s, %s) = %v, want %v", tt.t, tt.amount, err, tt.err)
		}
		if errors.Is(err, ErrPrecision) && !strings.Contains(err.Error(), "precision") {
			t.Errorf("precision error %q does not say precision", err)
		}
	}
}

func TestCheckCurrencyOrUnit(t *testing.T) {
	tests := []struct {
		t    AssetType
		unit string
		ok   bool
	}{
		{Currency, "EUR", true},
		{Currency, "USD", true},
		{Currency, "eur", false},
		{Currency, "Eur", false},
		{Currency, "ABC", false}, // shape fine, not a listed code
		{Currency, "EURO", false},
		{Currency, "", false},
		{Token, "api-credits", true},
		{Token, "gpu-hours-2026", true},
		{Token, "EUR", false},
		{Token, "eur", false}, // collides with ISO 4217 EUR
		{Token, "api_credits", false},
		{Token, "-credits", false},
		{Token, "credits-", false},
		{Token, "x", false},
		{Token, strings.Repeat("a", 33), false},
		{ServiceUnit, "compute-hours", true},
		{Entitlement, "premium-seats", true},
		{AssetType("Currency"), "EUR", false},
	}
	for _, tt := range tests {
		err := CheckCurrencyOrUnit(tt.t, tt.unit)
		if (err == nil) != tt.ok {
			t.Errorf("CheckCurrencyOrUnit(%s, %q) = %v, want ok=%v", tt.t, tt.unit, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrCurrencyCode) {
			t.Errorf("error %v does not wrap ErrCurrencyCode", err)
		}
		if err != nil && tt.t == Currency && tt.unit != "" && !strings.Contains(err.Error(), "ISO 4217") {
			t.Errorf("currency error %q does not mention ISO 4217", err)
		}
	}
	if len(iso4217()) < 150 {
		t.Errorf("ISO 4217 list has %d codes", len(iso4217()))
	}
}
