package arsia

import (
	"errors"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	good := map[string]Version{"1.0": {1, 0}, "1.10": {1, 10}, "01.0": {1, 0}, "2.3": {2, 3}, "999999999.0": {999999999, 0}}
	for in, want := range good {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "1", "1.0.0", "1.", ".0", "v1.0", "1.0 ", "-1.0", "+1.0", "1.a", "١.٠", "1234567890.0"} {
		if _, err := ParseVersion(in); !errors.Is(err, ErrInvalidVersion) {
			t.Errorf("ParseVersion(%q) error %v", in, err)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{{"1.0", "1.1", -1}, {"1.0", "1.0", 0}, {"1.10", "1.9", 1}, {"2.0", "1.99", 1}}
	for _, tc := range tests {
		if got, err := CompareVersions(tc.a, tc.b); err != nil || got != tc.want {
			t.Errorf("CompareVersions(%s, %s) = %d, %v", tc.a, tc.b, got, err)
		}
	}
	if _, err := CompareVersions("1", "1.0"); err == nil {
		t.Error("bad version compared")
	}
	if _, err := CompareVersions("1.0", "x"); err == nil {
		t.Error("bad version compared")
	}
}

func TestIsCompatible(t *testing.T) {
	tests := []struct {
		ours, theirs, minV string
		want               bool
	}{
		{"1.0", "1.0", "", true},
		{"1.0", "2.0", "", false},
		{"1.0", "1.5", "1.0", true},
		{"1.0", "1.5", "1.2", false},
		{"1.3", "1.5", "1.2", true},
	}
	for _, tc := range tests {
		if got, err := IsCompatible(tc.ours, tc.theirs, tc.minV); err != nil || got != tc.want {
			t.Errorf("IsCompatible(%s, %s, %s) = %v, %v", tc.ours, tc.theirs, tc.minV, got, err)
		}
	}
	for _, bad := range [][3]string{{"x", "1.0", ""}, {"1.0", "x", ""}, {"1.0", "1.0", "x"}} {
		if ok, err := IsCompatible(bad[0], bad[1], bad[2]); err == nil || ok {
			t.Errorf("IsCompatible(%v) = %v, %v", bad, ok, err)
		}
	}
}

func TestNegotiate(t *testing.T) {
	wide := VersionRange{Min: Version{1, 0}, Max: Version{1, 2}}
	accept := []struct{ v, minV string }{{"1.0", ""}, {"1.0", "1.0"}, {"1.5", ""}, {"1.1", "1.2"}}
	for _, tc := range accept {
		if err := Negotiate(tc.v, tc.minV, wide); err != nil {
			t.Errorf("Negotiate(%q, %q): %v", tc.v, tc.minV, err)
		}
	}
	if err := Negotiate("1.0", "", SupportedVersions()); err != nil {
		t.Errorf("Negotiate with Supported: %v", err)
	}
	refuse := []struct{ v, minV string }{{"0.9", ""}, {"1.0", "1.3"}, {"2.0", ""}, {"x", ""}, {"1.0", "x"}}
	for _, tc := range refuse {
		err := Negotiate(tc.v, tc.minV, wide)
		var ae *Error
		if !errors.As(err, &ae) || ae.Code != CodeNotImplemented || !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("Negotiate(%q, %q) = %v", tc.v, tc.minV, err)
			continue
		}
		if err := CheckErrorDetails(ae.Code, ae.Details); err != nil {
			t.Errorf("details: %v", err)
		}
		sv := ae.Details["supported_versions"].(map[string]any)
		if sv["min"] != "1.0" || sv["max"] != "1.2" || ae.Details["requested_version"] != tc.v {
			t.Errorf("details %v", ae.Details)
		}
		wantMin := any(nil)
		if tc.minV != "" {
			wantMin = tc.minV
		}
		if ae.Details["requested_min_version"] != wantMin {
			t.Errorf("requested_min_version = %v", ae.Details["requested_min_version"])
		}
	}
}

// A refusal names the requested versions, bounded: they are the sender's
// text, and the refusal goes back signed.
func TestNegotiateBoundsWhatItEchoes(t *testing.T) {
	long := strings.Repeat("9", 10_000)
	err := Negotiate(long, long, SupportedVersions())
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v", err)
	}
	for _, k := range []string{"requested_version", "requested_min_version"} {
		if s, _ := e.Details[k].(string); len(s) > 310 || !strings.HasPrefix(s, "999") {
			t.Errorf("%s: %d bytes", k, len(s))
		}
	}
	if sv, _ := e.Details["supported_versions"].(map[string]any); sv["min"] != "1.0" || sv["max"] != "1.0" {
		t.Errorf("supported_versions %v", e.Details["supported_versions"])
	}
}
