package arsia

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// freshNow is the receiver's clock in these tests.
var freshNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// freshEnv builds a request whose ts and expires_at lie the given offsets
// from freshNow (expires nil: no expires_at), under profile ("" for no
// compliance object).
func freshEnv(ts time.Duration, expires *time.Duration, profile string) map[string]any {
	env := map[string]any{
		"v": "1.0", "id": "c0547001-e5f6-4071-a234-556677889900",
		"ts":   FormatTimestamp(freshNow.Add(ts)),
		"from": "agent:acme.client", "to": "agent:acme.gw", "intent": "request",
		"capabilities": []any{"acme.echo"},
		"payload":      map[string]any{"type": "com.acme/echo", "args": map[string]any{}},
	}
	if expires != nil {
		env["expires_at"] = FormatTimestamp(freshNow.Add(*expires))
	}
	if profile != "" {
		env["compliance"] = map[string]any{"profile": profile}
	}
	return env
}

func dur(d time.Duration) *time.Duration { return &d }

func customSkewProfiles(t *testing.T) *compliance.Registry {
	t.Helper()
	reg, err := compliance.Load([]byte(`{"version": "1.0.0", "profiles": {
	  "GDPR-STANDARD": {"name": "GDPR-STANDARD", "status": "active", "regulatory_references": ["x"],
	    "defaults": {"audit_required": false, "retention_days": null, "human_oversight": "not_required",
	    "explainability_required": false, "pii_involved": false, "data_residency": null}},
	  "TIGHT": {"name": "TIGHT", "status": "active", "defaults": {"clock_skew_seconds": 10}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestCheckFreshness(t *testing.T) {
	const (
		s = time.Second
		m = time.Minute
		h = time.Hour
	)
	year := 365 * 24 * h
	tight := customSkewProfiles(t)
	for _, tc := range []struct {
		name     string
		ts       time.Duration
		expires  *time.Duration
		profile  string
		profiles *compliance.Registry
		want     string // "" accepted
		field    string
	}{
		{name: "fresh request", ts: -s, expires: dur(299 * s)},
		{name: "fresh event, no expires_at", ts: 0},

		// expires_at in the past, judged with the skew (ts kept fresh).
		{name: "expired 20 s, default skew", ts: -30 * s, expires: dur(-20 * s)},
		{name: "expired 20 s, 10 s profile skew", ts: -5 * s, expires: dur(-20 * s), profile: "TIGHT", profiles: tight, want: IssueMessageExpired, field: "/expires_at"},
		{name: "expired 5 min, default skew (boundary)", ts: -290 * s, expires: dur(-5 * m)},
		{name: "expired 5 min + 1 ms, default skew", ts: -290 * s, expires: dur(-5*m - time.Millisecond), want: IssueMessageExpired, field: "/expires_at"},
		{name: "expired 5 min, EU-AI-ACT-HIGH-RISK", ts: -10 * s, expires: dur(-5 * m), profile: "EU-AI-ACT-HIGH-RISK", want: IssueMessageExpired, field: "/expires_at"},
		{name: "expired 1 h", ts: -h - 5*m, expires: dur(-h), want: IssueMessageExpired, field: "/expires_at"},
		{name: "expired 1 h, ts fresh", ts: 0, expires: dur(-h), want: IssueMessageExpired, field: "/expires_at"},

		// ts outside now ± skew.
		{name: "ts a year old", ts: -year, expires: dur(2 * h), want: IssueClockSkewExceeded, field: "/ts"},
		{name: "ts a day in the future", ts: 24 * h, expires: dur(25 * h), want: IssueClockSkewExceeded, field: "/ts"},
		{name: "ts ten years in the future", ts: 10 * year, expires: dur(10*year + 5*m), want: IssueClockSkewExceeded, field: "/ts"},
		{name: "event a year old", ts: -year, want: IssueClockSkewExceeded, field: "/ts"},

		// Exactly at the skew boundary, on both sides, and just past it.
		{name: "ts exactly skew old", ts: -300 * s, expires: dur(time.Minute)},
		{name: "ts skew + 1 ms old", ts: -300*s - time.Millisecond, expires: dur(time.Minute), want: IssueClockSkewExceeded, field: "/ts"},
		{name: "ts exactly skew ahead", ts: 300 * s, expires: dur(10 * m)},
		{name: "ts skew + 1 ms ahead", ts: 300*s + time.Millisecond, expires: dur(10 * m), want: IssueClockSkewExceeded, field: "/ts"},

		// Per-profile skew.
		{name: "EU-AI-ACT-HIGH-RISK 120 s old", ts: -120 * s, expires: dur(m), profile: "EU-AI-ACT-HIGH-RISK"},
		{name: "EU-AI-ACT-HIGH-RISK 121 s old", ts: -121 * s, expires: dur(m), profile: "EU-AI-ACT-HIGH-RISK", want: IssueClockSkewExceeded, field: "/ts"},
		{name: "EU-AI-ACT-HIGH-RISK 121 s ahead", ts: 121 * s, expires: dur(10 * m), profile: "EU-AI-ACT-HIGH-RISK", want: IssueClockSkewExceeded, field: "/ts"},
		{name: "MIFID-II 60 s old", ts: -60 * s, expires: dur(m), profile: "MIFID-II"},
		{name: "MIFID-II 120 s old", ts: -120 * s, expires: dur(m), profile: "MIFID-II", want: IssueClockSkewExceeded, field: "/ts"},
		{name: "DORA 61 s old", ts: -61 * s, expires: dur(m), profile: "DORA", want: IssueClockSkewExceeded, field: "/ts"},
		{name: "DORA 61 s past expiry", ts: -10 * s, expires: dur(-61 * s), profile: "DORA", want: IssueMessageExpired, field: "/expires_at"},
		{name: "GDPR-STANDARD 120 s old", ts: -120 * s, expires: dur(3 * m), profile: "GDPR-STANDARD"},
		{name: "GDPR-STANDARD 301 s old", ts: -301 * s, expires: dur(3 * m), profile: "GDPR-STANDARD", want: IssueClockSkewExceeded, field: "/ts"},
		{name: "unknown profile falls back to 300 s", ts: -299 * s, expires: dur(m), profile: "NO-SUCH-PROFILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := freshEnv(tc.ts, tc.expires, tc.profile)
			e := CheckFreshness(env, tc.profiles, freshNow)
			if tc.want == "" {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			checkFreshnessError(t, e, tc.want, tc.field)
		})
	}
}

// checkFreshnessError checks the code, that the wire answer is
// invalid_request 400, that details name the field by pointer, and that the
// error can be sent as a signed ARSIA error.
func checkFreshnessError(t *testing.T, e *Error, code, field string) {
	t.Helper()
	if e == nil {
		t.Fatalf("accepted, want %s", code)
	}
	if e.Code != code || e.WireCode() != CodeInvalidRequest || e.HTTPStatus() != 400 || ToASC(e.Code) != 4000 {
		t.Fatalf("%s (wire %s, %d, ASC %d), want %s", e.Code, e.WireCode(), e.HTTPStatus(), ToASC(e.Code), code)
	}
	if !errors.Is(e, ErrNotFresh) {
		t.Errorf("%v does not wrap ErrNotFresh", e)
	}
	if e.Details["field"] != field {
		t.Errorf("details %v, want field %s", e.Details, field)
	}
	if _, err := NewError("agent:acme.gw", "agent:acme.client", NewID(), e, BuildOptions{Now: freshNow}); err != nil {
		t.Errorf("cannot be sent: %v", err)
	}
}

func TestCheckFreshnessBadTimestamps(t *testing.T) {
	huge := strings.Repeat("9", 100000)
	for _, tc := range []struct {
		name  string
		edit  func(map[string]any)
		code  string
		field string
	}{
		{"no ts", func(m map[string]any) { delete(m, "ts") }, IssueMissingTS, "/ts"},
		{"ts null", func(m map[string]any) { m["ts"] = nil }, IssueInvalidTS, "/ts"},
		{"ts number", func(m map[string]any) { m["ts"] = json.Number("1777636800") }, IssueInvalidTS, "/ts"},
		{"ts without ms", func(m map[string]any) { m["ts"] = "2026-05-01T12:00:00Z" }, IssueInvalidTS, "/ts"},
		{"ts with offset", func(m map[string]any) { m["ts"] = "2026-05-01T12:00:00.000+00:00" }, IssueInvalidTS, "/ts"},
		{"ts garbage", func(m map[string]any) { m["ts"] = "<script>" + huge }, IssueInvalidTS, "/ts"},
		{"ts Feb 30", func(m map[string]any) { m["ts"] = "2026-02-30T12:00:00.000Z" }, IssueInvalidTS, "/ts"},
		{"expires_at garbage", func(m map[string]any) { m["expires_at"] = "tomorrow" + huge }, IssueInvalidExpiresAt, "/expires_at"},
		{"expires_at object", func(m map[string]any) { m["expires_at"] = map[string]any{} }, IssueInvalidExpiresAt, "/expires_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := freshEnv(0, dur(time.Minute), "")
			tc.edit(env)
			e := CheckFreshness(env, nil, freshNow)
			checkFreshnessError(t, e, tc.code, tc.field)
			b, _ := json.Marshal(e.Object())
			if len(b) > 1000 || strings.Contains(string(b), "script\\u003e") || strings.Contains(string(b), "99999") || strings.Contains(string(b), "tomorrow") {
				t.Errorf("the message's value is echoed: %.200s", b)
			}
		})
	}
	// Not even an envelope.
	checkFreshnessError(t, CheckFreshness(nil, nil, freshNow), IssueMissingTS, "/ts")
}

// The skew comes from the receiver's profile, never from the message.
func TestCheckFreshnessIgnoresMessageSkew(t *testing.T) {
	env := freshEnv(-200*time.Second, dur(time.Minute), "EU-AI-ACT-HIGH-RISK")
	env["compliance"].(map[string]any)["clock_skew_seconds"] = 300
	checkFreshnessError(t, CheckFreshness(env, nil, freshNow), IssueClockSkewExceeded, "/ts")
	if e := CheckFreshness(env, nil, freshNow); e.Details["clock_skew_seconds"] != int64(120) {
		t.Errorf("details %v", e.Details)
	}
}

func TestAcceptanceWindowEnd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]any
		want    time.Time
		ok      bool
		profile *compliance.Registry
	}{
		{"request: ts + skew", freshEnv(0, dur(5*time.Minute), ""), freshNow.Add(300 * time.Second), true, nil},
		{"event: ts + skew", freshEnv(0, nil, ""), freshNow.Add(300 * time.Second), true, nil},
		{"long expiry does not extend it", freshEnv(0, dur(24*time.Hour), ""), freshNow.Add(300 * time.Second), true, nil},
		{"EU-AI-ACT-HIGH-RISK", freshEnv(0, dur(time.Hour), "EU-AI-ACT-HIGH-RISK"), freshNow.Add(120 * time.Second), true, nil},
		{"MIFID-II", freshEnv(0, dur(time.Hour), "MIFID-II"), freshNow.Add(60 * time.Second), true, nil},
		{"expiry before ts + skew", freshEnv(0, dur(-4*time.Minute), ""), freshNow.Add(time.Minute), true, nil},
		{"no ts", map[string]any{"expires_at": FormatTimestamp(freshNow)}, time.Time{}, false, nil},
		{"bad expires_at", map[string]any{"ts": FormatTimestamp(freshNow), "expires_at": "soon"}, time.Time{}, false, nil},
	} {
		got, ok := AcceptanceWindowEnd(tc.env, tc.profile)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// The window is exact: CheckFreshness accepts the message at the window's
// end and refuses it a millisecond later, for every profile, so a replay
// record kept until AcceptanceWindowEnd covers every instant at which the
// same bytes would be accepted.
func TestAcceptanceWindowMatchesCheck(t *testing.T) {
	for _, profile := range append([]string{""}, compliance.Default().Names()...) {
		for _, exp := range []*time.Duration{nil, dur(time.Second), dur(5 * time.Minute), dur(24 * time.Hour)} {
			env := freshEnv(0, exp, profile)
			end, ok := AcceptanceWindowEnd(env, nil)
			if !ok {
				t.Fatalf("%s: no window", profile)
			}
			if e := CheckFreshness(env, nil, end); e != nil {
				t.Errorf("%s %v: refused at the window's end: %v", profile, exp, e)
			}
			if e := CheckFreshness(env, nil, end.Add(time.Millisecond)); e == nil {
				t.Errorf("%s %v: accepted after the window's end", profile, exp)
			}
		}
	}
}
