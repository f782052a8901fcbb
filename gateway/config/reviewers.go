package config

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// Reviewer is a person (or program) who may decide approvals.
type Reviewer struct {
	// ID is recorded as the actor of their decisions.
	ID          string `yaml:"id"`
	DisplayName string `yaml:"display_name"`
	// Roles name entries of Config.Roles: what they may decide. When the
	// configuration defines no roles at all, every reviewer may decide
	// every request; once it does, a reviewer without roles may decide
	// none.
	Roles []string `yaml:"roles"`
	// TokenSHA256 is "sha256:" + hex SHA-256 of their API token
	// (custos serve token prints one).
	TokenSHA256 string `yaml:"token_sha256" secret:"true"`
	// PasswordHash is an argon2id ("$argon2id$…") or bcrypt ("$2b$…")
	// hash of the password they sign in to the web inbox with
	// (custos serve password prints one).
	PasswordHash string `yaml:"password_hash" secret:"true"`
}

// Role says which requests a reviewer holding it may decide: those whose
// capability (the action name) matches one of Capabilities and whose
// compliance profile is one of Profiles. An empty list does not restrict
// that dimension; All grants everything.
type Role struct {
	All bool `yaml:"all"`
	// Capabilities are patterns: "billing.*", "demo.echo", "*".
	Capabilities []string `yaml:"capabilities"`
	// Profiles are compliance profile names ("MIFID-II").
	Profiles []string `yaml:"profiles"`
}

// AdminReviewer is the id of the per-process administrator custos serve
// prints a login token for; configured reviewers may not use it.
const AdminReviewer = "admin"

// checkReviewers checks the reviewers, roles, separation_of_duties and
// justification_required settings.
func (c *Config) checkReviewers() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	profiles := compliance.Default()
	knownProfile := func(p string) bool { _, ok := profiles.Get(p); return ok }

	names := make([]string, 0, len(c.Roles))
	for name := range c.Roles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := c.Roles[name]
		if name == "" || strings.ContainsAny(name, " \t\n") {
			bad("roles: %q is not a role name", name)
		}
		if strings.HasPrefix(name, "custos.") {
			bad("roles: %q: names starting with custos. are reserved", name)
		}
		if !r.All && len(r.Capabilities) == 0 && len(r.Profiles) == 0 {
			bad("roles.%s: grants nothing (give all: true, capabilities or profiles)", name)
		}
		if r.All && (len(r.Capabilities) > 0 || len(r.Profiles) > 0) {
			bad("roles.%s: all: true with capabilities or profiles (all already grants everything)", name)
		}
		for _, p := range r.Capabilities {
			if _, err := path.Match(p, ""); err != nil || strings.TrimSpace(p) == "" {
				bad("roles.%s.capabilities: %q is not a capability pattern", name, p)
			}
		}
		for _, p := range r.Profiles {
			if !knownProfile(p) {
				bad("roles.%s.profiles: unknown compliance profile %q (custos profile list)", name, p)
			}
		}
	}
	for _, list := range []struct {
		key   string
		names []string
	}{{"separation_of_duties", c.SeparationOfDuties}, {"justification_required", c.JustificationRequired}} {
		for _, p := range list.names {
			if !knownProfile(p) {
				bad("%s: unknown compliance profile %q", list.key, p)
			}
		}
	}

	for i, o := range c.AllowedOrigins {
		if !validOrigin(o) {
			bad("allowed_origins[%d]: %q is not an origin (scheme://host[:port], http or https, nothing after)", i, o)
		}
	}

	ids := map[string]bool{}
	tokens := map[string]bool{}
	for i, r := range c.Reviewers {
		if r.ID == "" {
			bad("reviewers[%d]: no id", i)
			continue
		}
		if r.ID == AdminReviewer {
			bad("reviewers[%d]: the id %q is reserved for the login token custos serve prints", i, r.ID)
		}
		if ids[r.ID] {
			bad("reviewers[%d]: the id %q appears twice", i, r.ID)
		}
		ids[r.ID] = true
		if r.TokenSHA256 == "" && r.PasswordHash == "" {
			bad("reviewers[%d] (%s): no credentials: give token_sha256 (custos serve token) or password_hash (custos serve password)", i, r.ID)
		}
		if r.TokenSHA256 != "" {
			h, ok := strings.CutPrefix(r.TokenSHA256, "sha256:")
			switch {
			case !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "":
				bad("reviewers[%d] (%s): token_sha256 must be \"sha256:\" and 64 lower-case hex digits (custos serve token prints one)", i, r.ID)
			case tokens[r.TokenSHA256]:
				bad("reviewers[%d] (%s): the same token as another reviewer", i, r.ID)
			}
			tokens[r.TokenSHA256] = true
		}
		if r.PasswordHash != "" && !strings.HasPrefix(r.PasswordHash, "$argon2id$") &&
			!slices.ContainsFunc([]string{"$2a$", "$2b$", "$2y$"}, func(p string) bool { return strings.HasPrefix(r.PasswordHash, p) }) {
			bad("reviewers[%d] (%s): password_hash must be an argon2id or bcrypt hash (custos serve password prints one)", i, r.ID)
		}
		for _, role := range r.Roles {
			if _, ok := c.Roles[role]; !ok {
				bad("reviewers[%d] (%s): unknown role %q", i, r.ID, role)
			}
		}
	}
	return errs
}

// validOrigin reports whether o is a browser origin as the Origin header
// carries it: an http or https scheme, a host and an optional port, in
// lower case, with no path, query, fragment or user information.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery && u.Opaque == "" &&
		o == u.Scheme+"://"+u.Host && o == strings.ToLower(o)
}
