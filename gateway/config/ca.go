package config

import (
	"fmt"
	"time"
)

// CertificateAuthority is the gateway's optional issuing CA
// (docs/certificate-authority.md):
//
//	certificate_authority:
//	  enabled: true
//	  validity: 2160h        # default lifetime of an issued certificate (90 days)
//	  max_validity: 9528h    # the longest a request may ask for (397 days at most)
//	  operators: [admin]     # reviewer ids allowed to issue, list and revoke
//	  dir: ""                # where ca-key.pem and ca-root.pem live (the data directory)
//
// Its root is anchored in the gateway's own trust store: a peer whose
// identity record carries a chain it issued is L2 until revoked. It never
// issues L3. Changes need a restart.
type CertificateAuthority struct {
	Enabled     bool          `yaml:"enabled"`
	Validity    time.Duration `yaml:"validity"`
	MaxValidity time.Duration `yaml:"max_validity"`
	Operators   []string      `yaml:"operators"`
	Dir         string        `yaml:"dir"`
}

// Defaults of CertificateAuthority.
const (
	DefaultCAValidity    = 90 * 24 * time.Hour
	DefaultCAMaxValidity = 397 * 24 * time.Hour
)

// CAOperators returns the reviewer ids allowed to operate the CA: the
// configured ones, or the per-process administrator alone.
func (c CertificateAuthority) CAOperators() []string {
	if len(c.Operators) == 0 {
		return []string{AdminReviewer}
	}
	return c.Operators
}

// CADir is where the CA's key and root are kept.
func (c *Config) CADir() string {
	if c.CertificateAuthority.Dir != "" {
		return c.CertificateAuthority.Dir
	}
	return c.Data
}

func (c *Config) checkCA() []error {
	a := c.CertificateAuthority
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("certificate_authority: "+format, args...))
	}
	if a.Validity < 0 || a.MaxValidity < 0 {
		bad("validity and max_validity must not be negative")
	}
	if a.MaxValidity > DefaultCAMaxValidity {
		bad("max_validity %s exceeds 397 days (9528h), the longest certificate lifetime browsers and CAs accept", a.MaxValidity)
	}
	v, m := a.Validity, a.MaxValidity
	if v == 0 {
		v = DefaultCAValidity
	}
	if m == 0 {
		m = DefaultCAMaxValidity
	}
	if v > m {
		bad("validity %s exceeds max_validity %s", v, m)
	}
	if v > 0 && v < time.Hour {
		bad("validity %s is shorter than one hour", v)
	}
	known := map[string]bool{AdminReviewer: true}
	for _, r := range c.Reviewers {
		known[r.ID] = true
	}
	for _, op := range a.Operators {
		if !known[op] {
			bad("operator %q is not a configured reviewer (nor %q)", op, AdminReviewer)
		}
	}
	return errs
}
