package aais

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

func rat(t *testing.T, s string) *big.Rat {
	t.Helper()
	x, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad test number %q", s)
	}
	return x
}

func TestParseNumericRange(t *testing.T) {
	tests := []struct {
		in       string
		in_, out []string // numbers inside and outside the range
		err      string   // substring of the error; "" accepts
	}{
		{in: "value <= 100", in_: []string{"100", "1e2", "100.000", "-5", "0"}, out: []string{"100.0000000000000001", "101", "1e3"}},
		{in: "value < 100", in_: []string{"99.9999999999999999999"}, out: []string{"100", "1E2"}},
		{in: "value >= 0", in_: []string{"0", "-0", "1e-400"}, out: []string{"-1e-400", "-0.0000001"}},
		{in: "value > 0", in_: []string{"1e-400"}, out: []string{"0", "-0"}},
		{in: "value == 5", in_: []string{"5", "5.0", "0.5e1", "50e-1"}, out: []string{"5.000000000000000000001", "4.9"}},
		{in: "0 < value", in_: []string{"1"}, out: []string{"0"}},
		{in: "100 >= value", in_: []string{"100"}, out: []string{"100.5"}},
		{in: "100 <= value < 500", in_: []string{"100", "499.999999999999999999"}, out: []string{"500", "99.99", "5e2"}},
		{in: "  -1.5 < value <= 2e3 ", in_: []string{"2000", "-1.4"}, out: []string{"-1.5", "2000.01"}},
		{in: "5 <= value <= 5", in_: []string{"5"}, out: []string{"5.1"}},
		{in: "value<=100", in_: []string{"100"}},
		{in: "1.7976931348623157e308 >= value", in_: []string{"1"}},
		// Bounds a float64 would round onto the argument: exact
		// comparison never widens what the reviewer approved.
		{in: "value >= 100.000000000000000001", out: []string{"100"}},
		{in: "value <= 99.9999999999999999999", out: []string{"100"}},
		{in: "value < 9007199254740993", in_: []string{"9007199254740992"}},

		{in: "", err: "want"},
		{in: "value", err: "want"},
		{in: "value <> 100", err: `unknown operator "<>"`},
		{in: "value =< 100", err: `unknown operator "=<"`},
		{in: "value != 100", err: `unknown operator "!="`},
		{in: "value = 100", err: `unknown operator "="`},
		{in: "value ≤ 100", err: `unknown operator '≤'`},
		{in: "value <= NaN", err: "NaN and infinities are not numbers"},
		{in: "value <= Infinity", err: "NaN and infinities are not numbers"},
		{in: "value <= -Inf", err: "NaN and infinities are not numbers"},
		{in: "value <= 0x10", err: "not a JSON number"},
		{in: "value <= 1_000", err: "not a JSON number"},
		{in: "value <= +1", err: "not a JSON number"},
		{in: "value <= 01", err: "not a JSON number"},
		{in: "value <= .5", err: "not a JSON number"},
		{in: "value <= 5.", err: "not a JSON number"},
		{in: "value <= 1e", err: "not a JSON number"},
		{in: "value <= 1e401", err: "exponent beyond ±400"},
		{in: "value <= 1e-999999999", err: "exponent beyond ±400"},
		{in: "value <= 1e0000000401", err: "exponent beyond ±400"},
		{in: "value <= 2e308", err: "out of range"},
		{in: "value <= -1.8e308", err: "out of range"},
		{in: "value <= " + strings.Repeat("9", 65), err: "longer than 64"},
		{in: "value <= amount", err: `"amount" is not a number`},
		{in: "amount <= 100", err: `the argument is written as the word value`},
		{in: "Value <= 100", err: `"Value" is not a number`},
		{in: "value <= 100 < 200", err: "want"},
		{in: "100 <= value < 50", err: "holds no number"},
		{in: "5 < value < 5", err: "holds no number"},
		{in: "5 <= value < 5", err: "holds no number"},
		{in: "1 > value > 0", err: "interval is written with <"},
		{in: "1 == value < 3", err: "interval is written with <"},
		{in: "value <= 1 ; rm", err: "unexpected character"},
		{in: "value\t<= 1", err: "unexpected character"},
		{in: "value <= 1 value <= 2 value", err: "too many terms"},
		{in: strings.Repeat(" ", 301), err: "at most 300"},
	}
	for _, tt := range tests {
		r, err := ParseNumericRange(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if r.String() != strings.TrimSpace(tt.in) {
			t.Errorf("%q: String() = %q", tt.in, r.String())
		}
		for _, n := range tt.in_ {
			if !r.Contains(rat(t, n)) {
				t.Errorf("%q: %s should be inside", tt.in, n)
			}
		}
		for _, n := range tt.out {
			if r.Contains(rat(t, n)) {
				t.Errorf("%q: %s should be outside", tt.in, n)
			}
		}
		if r.Contains(nil) {
			t.Errorf("%q: nil is inside", tt.in)
		}
	}
}

func TestArgumentRangeConstraint(t *testing.T) {
	parse := func(t *testing.T, v string) (ConstraintSet, error) {
		t.Helper()
		return ParseConstraints(Constraints{"action_name": json.RawMessage(`"shell.exec"`), "argument_range": json.RawMessage(v)})
	}
	for _, bad := range []struct{ v, err string }{
		{`{}`, "non-empty object"},
		{`[]`, "non-empty object"},
		{`{"amount": "value <= 1"}`, "not a JSON Pointer"},
		{`{"/amount": 100}`, "want a range as a string"},
		{`{"/amount": ""}`, "want a range as a string"},
		{`{"/amount": "value <= 1", "/n": "value >< 3"}`, `"/n": "value >< 3": unknown operator`},
		{`{"/amount": "value <= 1e500"}`, "exponent beyond"},
	} {
		_, err := parse(t, bad.v)
		if !errors.Is(err, ErrConstraint) || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("%s: error %v, want ErrConstraint containing %q", bad.v, err, bad.err)
		}
	}
	cs, err := parse(t, `{"/amount": "value <= 100", "/limits/0": "0 < value < 10"}`)
	if err != nil {
		t.Fatal(err)
	}
	action := func(args string) *Request {
		v, err := jcs.Decode([]byte(args))
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		a := baseAction()
		a["arguments"] = v
		return newReq(t, "apr_n", baseOrigin, a, nil)
	}
	tests := []struct {
		args string
		ok   bool
		why  string
	}{
		{`{"amount": 100, "limits": [9.99]}`, true, ""},
		{`{"amount": 1e2, "limits": [1]}`, true, ""},
		{`{"amount": 100.5, "limits": [1]}`, false, `argument_range "/amount": outside value <= 100`},
		{`{"amount": 100, "limits": [10]}`, false, `argument_range "/limits/0": outside`},
		{`{"amount": "50", "limits": [1]}`, false, "not a number"},
		{`{"amount": null, "limits": [1]}`, false, "not a number"},
		{`{"amount": {"v": 1}, "limits": [1]}`, false, "not a number"},
		{`{"amount": [1], "limits": [1]}`, false, "not a number"},
		{`{"amount": true, "limits": [1]}`, false, "not a number"},
		{`{"limits": [1]}`, false, "no such argument"},
		{`{"amount": 1, "limits": []}`, false, "no such argument"},
	}
	for _, tt := range tests {
		ok, why, because := cs.Explain(action(tt.args), ruleNow)
		if ok != tt.ok || !strings.Contains(why, tt.why) {
			t.Errorf("%s: (%v, %q), want (%v, %q)", tt.args, ok, why, tt.ok, tt.why)
		}
		if ok && !strings.Contains(strings.Join(because, "\n"), `argument "/amount": value <= 100 holds`) {
			t.Errorf("%s: because %q does not name the range", tt.args, because)
		}
		if !ok && because != nil {
			t.Errorf("%s: a non-match explains %q", tt.args, because)
		}
	}
}

// FuzzParseNumericRange: any text either parses into a range whose
// string form parses to the same range, or is refused with an error; it
// never panics. Numbers of any text compare without panicking.
func FuzzParseNumericRange(f *testing.F) {
	for _, s := range []string{
		"value <= 100", "100 <= value < 500", "0 < value", "value == 5", "-1.5e3 < value <= 2E+3",
		"value <> 1", "value <= NaN", "value <= 1e401", "value <= 2e308", "5 < value < 5", "1 > value > 0",
		"value <= 1e-400", "value", "", "≤", "value <= 0.1 0.2", "value <= -0",
	} {
		f.Add(s, "100")
	}
	f.Add("value < 1", "1e-400")
	f.Add("value < 1", "-0")
	f.Add("value < 1", "99999999999999999999999999999999999999999999999999999999999999999999")
	f.Fuzz(func(t *testing.T, expr, number string) {
		r, err := ParseNumericRange(expr)
		if err != nil {
			if r.Lower != nil || r.Upper != nil {
				t.Fatalf("%q: refused but with bounds", expr)
			}
			return
		}
		if r.Lower == nil && r.Upper == nil {
			t.Fatalf("%q: accepted without a bound", expr)
		}
		if r.Lower != nil && r.Upper != nil && r.Lower.Cmp(r.Upper) > 0 {
			t.Fatalf("%q: empty interval accepted", expr)
		}
		again, err := ParseNumericRange(r.String())
		if err != nil {
			t.Fatalf("%q: its String %q does not parse: %v", expr, r.String(), err)
		}
		if !sameBound(r.Lower, again.Lower) || !sameBound(r.Upper, again.Upper) || r.LowerIncl != again.LowerIncl || r.UpperIncl != again.UpperIncl {
			t.Fatalf("%q: reparsing changed the range", expr)
		}
		if x, err := parseDecimal(number); err == nil {
			_ = r.Contains(x)
			if r.Lower != nil && r.LowerIncl && !r.Contains(r.Lower) && (r.Upper == nil || r.Upper.Cmp(r.Lower) >= 0) {
				t.Fatalf("%q: its inclusive lower bound is outside", expr)
			}
		}
	})
}

func sameBound(a, b *big.Rat) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(b) == 0
}

// FuzzArgumentRange: matching a range against any arguments object never
// panics, and a match always comes with an explanation.
func FuzzArgumentRange(f *testing.F) {
	f.Add("value <= 100", `{"amount": 100}`)
	f.Add("100 <= value < 500", `{"amount": 1e2}`)
	f.Add("value > 0", `{"amount": "5"}`)
	f.Add("value > 0", `{"amount": [5]}`)
	f.Add("value > 0", `{"amount": 1e400}`)
	f.Fuzz(func(t *testing.T, expr, args string) {
		rng, _ := json.Marshal(map[string]string{"/amount": expr})
		cs, err := ParseConstraints(Constraints{"action_name": json.RawMessage(`"shell.exec"`), "argument_range": rng})
		if err != nil {
			return
		}
		v, err := jcs.Decode([]byte(args))
		if err != nil {
			return
		}
		a := baseAction()
		a["arguments"] = v
		req, err := NewRequest(RequestParams{ID: "apr_f", CreatedAt: ruleNow, Origin: baseOrigin, Action: a,
			Risk: Risk{Level: RiskLow, Reasons: []string{"r"}}, Choices: []Choice{{Decision: Deny, Scope: ScopeOnce, Label: "Deny"}}})
		if err != nil {
			return
		}
		ok, why, because := cs.Explain(req, ruleNow)
		if ok == (why != "") || ok != (len(because) > 0) {
			t.Fatalf("inconsistent answer (%v, %q, %q)", ok, why, because)
		}
	})
}
