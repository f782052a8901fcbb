package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCertificateAuthority(t *testing.T) {
	for name, tc := range map[string]struct{ yml, want string }{
		"validity above max": {"certificate_authority:\n  enabled: true\n  validity: 100h\n  max_validity: 10h\n", "exceeds max_validity"},
		"max above 397 days": {"certificate_authority:\n  max_validity: 10000h\n", "397 days"},
		"negative":           {"certificate_authority:\n  validity: -1h\n", "negative"},
		"too short":          {"certificate_authority:\n  validity: 5m\n", "shorter than one hour"},
		"unknown operator":   {"certificate_authority:\n  operators: [mallory]\n", `operator "mallory"`},
		"unknown key":        {"certificate_authority:\n  issue_l3: true\n", "issue_l3"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Default()
			err := c.Decode(strings.NewReader(tc.yml), "custos.yaml")
			if err == nil {
				err = c.Check()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
	c := Default()
	if err := c.Decode(strings.NewReader("certificate_authority:\n  enabled: true\n  validity: 720h\n"), "custos.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if ops := c.CertificateAuthority.CAOperators(); !slices.Equal(ops, []string{AdminReviewer}) || c.CADir() != c.Data {
		t.Fatalf("defaults: %v %s", ops, c.CADir())
	}
}
