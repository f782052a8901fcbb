package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The transport limits are on by default, and the example states them.
func TestLimitsDefaultsAndExample(t *testing.T) {
	def := Default()
	if err := def.Check(); err != nil {
		t.Fatal(err)
	}
	l := def.Limits
	if l.PerAddress.PerSecond <= 0 || l.PerAddress.Burst <= 0 || l.PerAddress.Tracked <= 0 || l.PerAddress.Connections <= 0 || l.PerAddress.BodyBytesInFlight < def.MaxBody ||
		l.Connections <= 0 || l.BodyBytesInFlight < def.MaxBody || l.BodyTimeout <= 0 || l.HeaderBytes <= 0 {
		t.Fatalf("a limit is off by default: %+v", l)
	}
	ex := Default()
	if err := ex.LoadFile("../../custos.example.yaml"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ex.Limits, def.Limits) {
		t.Fatalf("custos.example.yaml states other limits than the defaults:\n%+v\n%+v", ex.Limits, def.Limits)
	}
}

func TestLimitsDecode(t *testing.T) {
	c := Default()
	yml := "limits:\n  per_address:\n    per_second: 5\n    exempt: [10.0.0.0/8, \"2001:db8::1\"]\n  body_timeout: 3s\n"
	if err := c.Decode(strings.NewReader(yml), "t.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	// Keys left out keep their defaults; a list replaces the default one.
	if c.Limits.PerAddress.PerSecond != 5 || c.Limits.PerAddress.Burst != Default().Limits.PerAddress.Burst ||
		c.Limits.BodyTimeout != 3*time.Second || c.Limits.Connections != Default().Limits.Connections {
		t.Fatalf("limits: %+v", c.Limits)
	}
	got, err := c.Limits.PerAddress.ExemptPrefixes()
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::1/128")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("exempt %v %v", got, err)
	}
	// An empty list exempts nobody, loopback included.
	c = Default()
	if err := c.Decode(strings.NewReader("limits:\n  per_address:\n    exempt: []\n"), "t.yaml"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Limits.PerAddress.ExemptPrefixes(); len(got) != 0 {
		t.Fatalf("exempt: [] left %v", got)
	}
}

func TestLimitsRefused(t *testing.T) {
	for name, tc := range map[string]struct{ yml, want string }{
		"unknown key":        {"limits:\n  conections: 5\n", "conections"},
		"negative rate":      {"limits:\n  per_address:\n    per_second: -1\n", "limits.per_address"},
		"rate without burst": {"limits:\n  per_address:\n    burst: 0\n", "limits.per_address"},
		"rate untracked":     {"limits:\n  per_address:\n    tracked: 0\n", "limits.per_address.tracked"},
		"bad exempt":         {"limits:\n  per_address:\n    exempt: [localhost]\n", "limits.per_address.exempt"},
		"zoned exempt":       {"limits:\n  per_address:\n    exempt: [\"fe80::1%eth0\"]\n", "limits.per_address.exempt"},
		"budget below body":  {"max_body: 2048\nlimits:\n  body_bytes_in_flight: 1024\n", "limits.body_bytes_in_flight"},
		"address below body": {"max_body: 2048\nlimits:\n  per_address:\n    body_bytes_in_flight: 1024\n", "limits.per_address.body_bytes_in_flight"},
		"negative conns":     {"limits:\n  connections: -1\n", "limits.connections"},
		"negative timeout":   {"limits:\n  body_timeout: -1s\n", "limits.body_timeout"},
		"tiny header":        {"limits:\n  header_bytes: 100\n", "limits.header_bytes"},
	} {
		c := Default()
		err := c.Decode(strings.NewReader(tc.yml), "t.yaml")
		if err == nil {
			err = c.Check()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.want)
		}
	}
	// 0 turns a cap off.
	c := Default()
	if err := c.Decode(strings.NewReader("limits:\n  per_address: {per_second: 0, burst: 0, connections: 0}\n  connections: 0\n  body_bytes_in_flight: 0\n  body_timeout: 0s\n"), "t.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}
