package auth

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestPyRepr(t *testing.T) {
	for in, want := range map[string]string{
		"jti":        `'jti'`,
		"it's":       `"it's"`,
		`a'b"c`:      `'a\'b"c'`,
		"a\\b":       `'a\\b'`,
		"l\n\t\r":    `'l\n\t\r'`,
		"\x00\x7f":   `'\x00\x7f'`,
		"\u00a0":     `'\xa0'`,
		"\u2028":     `'\u2028'`,
		"\U000e0001": `'\U000e0001'`,
		"é":          `'é'`,
	} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
	long := pyRepr(strings.Repeat("x", 1000))
	if len(long) != maxQuoted+5 || !strings.HasSuffix(long, "...'") {
		t.Errorf("long value quoted as %d chars", len(long))
	}
}

func TestAudienceJSON(t *testing.T) {
	for in, want := range map[string]Audience{
		`"agent:a.b"`:               {"agent:a.b"},
		`["agent:a.b","agent:c.d"]`: {"agent:a.b", "agent:c.d"},
	} {
		var a Audience
		if err := json.Unmarshal([]byte(in), &a); err != nil || !slices.Equal(a, want) {
			t.Errorf("%s: %v %v", in, a, err)
		}
		out, _ := json.Marshal(a)
		if string(out) != in {
			t.Errorf("round trip %s -> %s", in, out)
		}
	}
	var a Audience
	if err := json.Unmarshal([]byte(`7`), &a); err == nil {
		t.Error("number accepted as audience")
	}
	c := Claims{Scope: " a.b  c.d "}
	if got := c.ScopeEntries(); !slices.Equal(got, []string{"a.b", "c.d"}) {
		t.Errorf("ScopeEntries %q", got)
	}
}
