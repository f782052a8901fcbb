package jcs_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// numberTable maps JSON number literals to their RFC 8785 text. The expected
// strings were computed at authoring time with Node.js v20:
// String(JSON.parse(literal)), i.e. ECMAScript Number::toString.
var numberTable = []struct {
	in, want string
}{
	{"0", "0"},
	{"-0", "0"},
	{"0.0", "0"},
	{"-0.0", "0"},
	{"0e10", "0"},
	{"-0e-10", "0"},
	{"0E+0", "0"},
	{"0.000e5", "0"},
	{"1", "1"},
	{"-1", "-1"},
	{"8542.0", "8542"},
	{"1e21", "1e+21"},
	{"1e20", "100000000000000000000"},
	{"1e-7", "1e-7"},
	{"1e-6", "0.000001"},
	{"-1e-7", "-1e-7"},
	{"-1e-6", "-0.000001"},
	{"5e-324", "5e-324"},
	{"4.9e-324", "5e-324"},
	{"3e-324", "5e-324"},
	{"-5e-324", "-5e-324"},
	{"2.4703282292062328e-324", "5e-324"},
	{"1.7976931348623157e308", "1.7976931348623157e+308"},
	{"-1.7976931348623157e308", "-1.7976931348623157e+308"},
	{"1.7976931348623158e308", "1.7976931348623157e+308"},
	{"2.2250738585072014e-308", "2.2250738585072014e-308"},
	{"2.225073858507201e-308", "2.225073858507201e-308"},
	{"-2.2250738585072014e-308", "-2.2250738585072014e-308"},
	{"4.9406564584124654e-324", "5e-324"},
	{"1e-323", "1e-323"},
	{"9007199254740991", "9007199254740991"},
	{"-9007199254740991", "-9007199254740991"},
	{"9007199254740992.0", "9007199254740992"},
	{"-9007199254740992.0", "-9007199254740992"},
	{"9007199254740993.0", "9007199254740992"},
	{"9007199254740994.0", "9007199254740994"},
	{"18014398509481984.0", "18014398509481984"},
	{"0.1", "0.1"},
	{"0.2", "0.2"},
	{"0.3", "0.3"},
	{"0.30000000000000004", "0.30000000000000004"},
	{"0.1e0", "0.1"},
	{"1e-1", "0.1"},
	{"-0.1", "-0.1"},
	{"1e-5", "0.00001"},
	{"1.5e-5", "0.000015"},
	{"123e-20", "1.23e-18"},
	{"1.5e300", "1.5e+300"},
	{"-1.5e300", "-1.5e+300"},
	{"295147905179352830000.0", "295147905179352830000"},
	{"295147905179352830000e0", "295147905179352830000"},
	{"100e-2", "1"},
	{"0.000001234", "0.000001234"},
	{"0.0000001234", "1.234e-7"},
	{"1234567890123456789012.0", "1.2345678901234568e+21"},
	{"-1234567890123456789012.0", "-1.2345678901234568e+21"},
	{"123456789012345678901.0", "123456789012345680000"},
	{"333333333.33333329", "333333333.3333333"},
	{"1E30", "1e+30"},
	{"4.50", "4.5"},
	{"2e-3", "0.002"},
	{"0.000000000000000000000000001", "1e-27"},
	{"1e22", "1e+22"},
	{"1e23", "1e+23"},
	{"9.999999999999999e22", "1e+23"},
	{"999999999999999999999.0", "1e+21"},
	{"100000000000000000000.0", "100000000000000000000"},
	{"1e+21", "1e+21"},
	{"1.0e21", "1e+21"},
	{"10e20", "1e+21"},
	{"0.1e22", "1e+21"},
	{"-1e21", "-1e+21"},
	{"-1e20", "-100000000000000000000"},
	{"999999999999999900000.0", "999999999999999900000"},
	{"999999999999999700000.0", "999999999999999700000"},
	{"1.0000000000000001e23", "1.0000000000000001e+23"},
	{"0.000001", "0.000001"},
	{"0.0000009999999999999999", "0.000001"},
	{"0.00000099999999999999999", "0.000001"},
	{"0.0000001", "1e-7"},
	{"0.00001", "0.00001"},
	{"0.0001", "0.0001"},
	{"0.001", "0.001"},
	{"0.01", "0.01"},
	{"1.0", "1"},
	{"10.0", "10"},
	{"100", "100"},
	{"1000", "1000"},
	{"10000", "10000"},
	{"100000", "100000"},
	{"1000000", "1000000"},
	{"10000000", "10000000"},
	{"100000000", "100000000"},
	{"1000000000", "1000000000"},
	{"10000000000", "10000000000"},
	{"100000000000", "100000000000"},
	{"1000000000000", "1000000000000"},
	{"10000000000000", "10000000000000"},
	{"100000000000000", "100000000000000"},
	{"1000000000000000", "1000000000000000"},
	{"9999999999999999e0", "10000000000000000"},
	{"1e15", "1000000000000000"},
	{"1e16", "10000000000000000"},
	{"1e17", "100000000000000000"},
	{"12", "12"},
	{"123", "123"},
	{"1234", "1234"},
	{"12345", "12345"},
	{"123456", "123456"},
	{"1234567", "1234567"},
	{"12345678", "12345678"},
	{"123456789", "123456789"},
	{"1234567890", "1234567890"},
	{"12345678901", "12345678901"},
	{"123456789012", "123456789012"},
	{"1234567890123", "1234567890123"},
	{"12345678901234", "12345678901234"},
	{"123456789012345", "123456789012345"},
	{"1234567890123456", "1234567890123456"},
	{"-1234567890123456", "-1234567890123456"},
	{"0.5", "0.5"},
	{"0.25", "0.25"},
	{"0.125", "0.125"},
	{"0.0625", "0.0625"},
	{"0.015625", "0.015625"},
	{"0.0009765625", "0.0009765625"},
	{"9.5367431640625e-7", "9.5367431640625e-7"},
	{"1.52587890625e-5", "0.0000152587890625"},
	{"1024", "1024"},
	{"1048576", "1048576"},
	{"1073741824", "1073741824"},
	{"1099511627776", "1099511627776"},
	{"1125899906842624", "1125899906842624"},
	{"1152921504606846976.0", "1152921504606847000"},
	{"1.8446744073709552e19", "18446744073709552000"},
	{"18446744073709551616.0", "18446744073709552000"},
	{"4503599627370496.5", "4503599627370496"},
	{"4503599627370497.5", "4503599627370498"},
	{"1.7976931348623157e307", "1.7976931348623158e+307"},
	{"2.5e-308", "2.5e-308"},
	{"1e-308", "1e-308"},
	{"1e-310", "1e-310"},
	{"1.23456789e-315", "1.23456789e-315"},
	{"-1e-320", "-1e-320"},
	{"3.141592653589793", "3.141592653589793"},
	{"2.718281828459045", "2.718281828459045"},
	{"1.4142135623730951", "1.4142135623730951"},
	{"-3.141592653589793", "-3.141592653589793"},
	{"6.02214076e23", "6.02214076e+23"},
	{"6.62607015e-34", "6.62607015e-34"},
	{"1.602176634e-19", "1.602176634e-19"},
	{"299792458", "299792458"},
	{"299792458.0", "299792458"},
	{"-273.15", "-273.15"},
	{"1e-2", "0.01"},
	{"1E-2", "0.01"},
	{"1e+2", "100"},
	{"1E+2", "100"},
	{"1.5", "1.5"},
	{"-1.5", "-1.5"},
	{"12.5", "12.5"},
	{"0.1234567890123456789", "0.12345678901234568"},
	{"1234.5678", "1234.5678"},
	{"1.0000000000000002", "1.0000000000000002"},
	{"0.9999999999999999", "0.9999999999999999"},
	{"2e-7", "2e-7"},
	{"2.5e-7", "2.5e-7"},
	{"9.99e-7", "9.99e-7"},
	{"1.000001e-6", "0.000001000001"},
	{"123456.789e3", "123456789"},
	{"0.00012345e4", "1.2345"},
	{"5e-7", "5e-7"},
	{"-5e-7", "-5e-7"},
	{"1e300", "1e+300"},
	{"1e308", "1e+308"},
	{"1e-300", "1e-300"},
	{"4.35", "4.35"},
	{"0.35", "0.35"},
	{"1.005", "1.005"},
	{"44.9999999999999", "44.9999999999999"},
	{"0.00000099", "9.9e-7"},
	{"9.5e20", "950000000000000000000"},
	{"1.1e21", "1.1e+21"},
	{"-0.0000001", "-1e-7"},
	{"0.0000012345678901234567", "0.0000012345678901234567"},
	{"1.2345678901234567e-7", "1.2345678901234566e-7"},
	{"123456789012345678000.0", "123456789012345680000"},
	{"1234567890123456780000.0", "1.2345678901234568e+21"},
	{"2e0", "2"},
	{"-2E-0", "-2"},
	{"5e-1", "0.5"},
}

func TestNumberTable(t *testing.T) {
	if len(numberTable) < 120 {
		t.Fatalf("number table has %d rows, want at least 120", len(numberTable))
	}
	run := func(t *testing.T, in, want string) {
		checkCanonical(t, in, want)
		checkCanonical(t, "["+in+"]", "["+want+"]")
		checkCanonical(t, `{"n": `+in+` }`, `{"n":`+want+`}`)
		checkCanonical(t, " \t\r\n"+in+"\n", want)
	}
	for _, tt := range numberTable {
		t.Run(tt.in, func(t *testing.T) { run(t, tt.in, tt.want) })
	}
	// Negative counterparts of every non-negative literal.
	for _, tt := range numberTable {
		if strings.HasPrefix(tt.in, "-") {
			continue
		}
		in, want := "-"+tt.in, "-"+tt.want
		if tt.want == "0" {
			want = "0" // -0 canonicalizes to 0
		}
		t.Run(in, func(t *testing.T) { run(t, in, want) })
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		name string
		f    float64
		want string
	}{
		{"MaxFloat64", math.MaxFloat64, "1.7976931348623157e+308"},
		{"-MaxFloat64", -math.MaxFloat64, "-1.7976931348623157e+308"},
		{"SmallestNonzero", math.SmallestNonzeroFloat64, "5e-324"},
		{"-SmallestNonzero", -math.SmallestNonzeroFloat64, "-5e-324"},
		{"SmallestNormal", 0x1p-1022, "2.2250738585072014e-308"},
		{"LargestSubnormal", math.Float64frombits(0x000fffffffffffff), "2.225073858507201e-308"},
		{"zero", 0, "0"},
		{"negative zero", math.Copysign(0, -1), "0"},
		{"one", 1, "1"},
		{"MaxSafeInteger", 1<<53 - 1, "9007199254740991"},
		{"2^53", 1 << 53, "9007199254740992"},
		{"2^53+2", 1<<53 + 2, "9007199254740994"},
		{"2^64", 0x1p64, "18446744073709552000"},
		{"2^-1", 0.5, "0.5"},
		{"2^-20", 0x1p-20, "9.5367431640625e-7"},
		{"2^-19", 0x1p-19, "0.0000019073486328125"},
		{"2^69", 0x1p69, "590295810358705700000"},
		{"2^70", 0x1p70, "1.1805916207174113e+21"},
		{"2^1023", 0x1p1023, "8.98846567431158e+307"},
		{"0.1+0.2 at run time", math.Float64frombits(0x3fd3333333333334), "0.30000000000000004"},
		{"1e21", 1e21, "1e+21"},
		{"1e21 prev", math.Nextafter(1e21, 0), "999999999999999900000"},
		{"1e-6", 1e-6, "0.000001"},
		{"1e-6 prev", math.Nextafter(1e-6, 0), "9.999999999999997e-7"},
		{"1e-7", 1e-7, "1e-7"},
		{"-1e-7", -1e-7, "-1e-7"},
		{"1/3", 1.0 / 3, "0.3333333333333333"},
		{"2/3", 2.0 / 3, "0.6666666666666666"},
		{"-2/3", -2.0 / 3, "-0.6666666666666666"},
		{"100/3", 100.0 / 3, "33.333333333333336"},
		{"pi", math.Pi, "3.141592653589793"},
		{"e", math.E, "2.718281828459045"},
		{"1e300", 1e300, "1e+300"},
		{"123e-20", 123e-20, "1.23e-18"},
		{"int 8542", 8542, "8542"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jcs.FormatNumber(tt.f)
			if err != nil || got != tt.want {
				t.Fatalf("FormatNumber(%v) = %q, %v; want %q", tt.f, got, err, tt.want)
			}
			prefix := []byte("x=")
			app, err := jcs.AppendNumber(prefix, tt.f)
			if err != nil || string(app) != "x="+tt.want {
				t.Fatalf("AppendNumber(%q, %v) = %q, %v; want %q", prefix, tt.f, app, err, "x="+tt.want)
			}
			if p, err := strconv.ParseFloat(got, 64); err != nil || p != tt.f {
				t.Fatalf("ParseFloat(%q) = %v, %v; want %v", got, p, err, tt.f)
			}
		})
	}
}

func TestFormatNumberNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000001)} {
		t.Run(strconv.FormatFloat(f, 'g', -1, 64), func(t *testing.T) {
			if s, err := jcs.FormatNumber(f); err == nil {
				t.Fatalf("FormatNumber(%v) = %q, want error", f, s)
			}
			dst := []byte("keep")
			out, err := jcs.AppendNumber(dst, f)
			if err == nil {
				t.Fatalf("AppendNumber(%v) = %q, want error", f, out)
			}
			if string(out) != "keep" {
				t.Fatalf("AppendNumber(%v) changed dst to %q on error", f, out)
			}
			if _, err := jcs.CanonicalizeValue(f); !errors.Is(err, jcs.ErrNumber) {
				t.Fatalf("CanonicalizeValue(%v) error = %v, want ErrNumber", f, err)
			}
			if _, err := jcs.CanonicalizeValue([]any{1.0, map[string]any{"x": f}}); !errors.Is(err, jcs.ErrNumber) {
				t.Fatalf("CanonicalizeValue(nested %v) error = %v, want ErrNumber", f, err)
			}
		})
	}
}

// differentialFloats returns n finite float64 values drawn from a fixed seed,
// mixing uniformly random bit patterns with values in the ranges documents
// actually use and the thresholds where the ECMAScript format changes.
func differentialFloats(n int) []float64 {
	r := rand.New(rand.NewPCG(8785, 2020))
	out := make([]float64, 0, n)
	for len(out) < n {
		var f float64
		switch len(out) % 5 {
		case 0: // any bit pattern
			f = math.Float64frombits(r.Uint64())
		case 1: // a random 53-bit significand scaled to roughly 1e-12..1e27
			f = math.Ldexp(float64(r.Uint64()>>11), r.IntN(130)-93)
		case 2: // subnormals and the smallest normals
			f = math.Float64frombits(r.Uint64N(1 << 53))
		case 3: // short decimals: k / 10^d, and values near the 1e-7 / 1e21 thresholds
			d := r.IntN(12)
			f = float64(r.Int64N(2_000_000)) / math.Pow10(d)
			if r.IntN(2) == 0 {
				f *= math.Pow10(r.IntN(30) - 15)
			}
		case 4: // integers of every size, up to 2^64 and around 1e21
			f = float64(r.Uint64() >> r.IntN(64))
			if r.IntN(4) == 0 {
				f = math.Nextafter(1e21, float64(r.IntN(2))*2e21)
				for k := r.IntN(1000); k > 0; k-- {
					f = math.Nextafter(f, 0)
				}
			}
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if r.IntN(2) == 0 {
			f = -f
		}
		out = append(out, f)
	}
	return out
}

// TestNodeDifferential compares FormatNumber with Node.js String(x) for
// 20 000 values in a single node process.
func TestNodeDifferential(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH")
	}
	if testing.Short() {
		t.Skip("skipping node differential in -short mode")
	}
	floats := differentialFloats(20000)
	var in bytes.Buffer
	for _, f := range floats {
		in.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		in.WriteByte('\n')
	}
	const script = `const ls = require('fs').readFileSync(0, 'utf8').split('\n'); ls.pop();
process.stdout.write(ls.map(l => String(Number(l))).join('\n') + '\n');`
	cmd := exec.CommandContext(t.Context(), node, "-e", script)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	want := strings.Split(strings.TrimSuffix(string(outb), "\n"), "\n")
	if len(want) != len(floats) {
		t.Fatalf("node returned %d lines for %d inputs", len(want), len(floats))
	}
	mismatches := 0
	for i, f := range floats {
		got, err := jcs.FormatNumber(f)
		if err != nil {
			t.Errorf("FormatNumber(%v): %v", f, err)
			continue
		}
		if got != want[i] {
			mismatches++
			if mismatches <= 20 {
				t.Errorf("FormatNumber(%s) [bits %#016x] = %q, node String() = %q",
					strconv.FormatFloat(f, 'g', -1, 64), math.Float64bits(f), got, want[i])
			}
		}
		back, err := strconv.ParseFloat(got, 64)
		if err != nil || back != f {
			t.Errorf("ParseFloat(FormatNumber(%v) = %q) = %v, %v: not a round trip", f, got, back, err)
		}
	}
	if mismatches > 0 {
		t.Errorf("%d of %d values differ from node", mismatches, len(floats))
	}
	t.Logf("compared %d values with node: %d mismatches", len(floats), mismatches)
}
