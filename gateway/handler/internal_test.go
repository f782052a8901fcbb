package handler

import (
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"5":                             5 * time.Second,
		" 5 ":                           5 * time.Second,
		"-5":                            0,
		"x":                             0,
		"99999999999999":                maxRetryAfter,
		"Sun, 30 Aug 2026 18:00:30 GMT": 30 * time.Second,
		"Sun, 30 Aug 2026 17:00:00 GMT": 0,
		"Sun, 30 Aug 2036 17:00:00 GMT": maxRetryAfter,
	}
	for in, want := range cases {
		if got := retryAfter(in, now); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

func TestSanitize(t *testing.T) {
	got := sanitize([]byte("a\x1b[31m\tb\r\n\u202ec\xff  "))
	if got != "a [31m b c\uFFFD" {
		t.Errorf("%q", got)
	}
	long := sanitize([]byte(strings.Repeat("é", 2000)))
	if n := len([]rune(long)); n != maxDiagnostic+1 || !strings.HasSuffix(long, "…") {
		t.Errorf("%d runes", n)
	}
}

func TestTraceparent(t *testing.T) {
	for _, bad := range []string{"", "00000000000000000000000000000000", "4BF92F3577B34DA6A3CE929D0E0E4736", "4bf92f3577b34da6a3ce929d0e0e47"} {
		if tp := traceparent(bad); tp != "" {
			t.Errorf("%q gave %q", bad, tp)
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine("/bin/prog", []string{"a", "", "b c", "d\ne", "ü"})
	if want := `/bin/prog a "" "b c" "d\ne" ü`; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}
