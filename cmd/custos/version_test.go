package main

import (
	"strings"
	"testing"
)

// A release build names its version with -ldflags "-X main.version=…";
// that name wins over whatever the build info says.
func TestVersionFromLinkerFlag(t *testing.T) {
	saved := version
	t.Cleanup(func() { version = saved })
	version = "v0.2.0"
	if v, _, _ := buildVersion(); v != "v0.2.0" {
		t.Fatalf("buildVersion = %q; want v0.2.0", v)
	}
	code, out, _ := custos(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "custos v0.2.0\n") {
		t.Fatalf("custos version: exit %d, %q; want it to start with custos v0.2.0", code, out)
	}
	version = ""
	if v, _, _ := buildVersion(); v == "" {
		t.Fatal("buildVersion without a linker flag is empty; want the build info's version or (devel)")
	}
}
