package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/gateway/onboard"
)

// Onboarding defaults.
const (
	DefaultOnboardingFetchTimeout = 10 * time.Second
	DefaultOnboardingInFlight     = 4
	MaxOnboardingInFlight         = 64
)

// Onboarding lets agents of other organizations onboard themselves
// (ARSIA-Identity §7, docs/onboarding.md): an agent asks at
// /v1/arsia/onboarding, the gateway runs the six phases against the
// agent's well-known endpoints and its capability policy, and an approved
// agent is a sender from then on, with a token of the authorization
// server:
//
//	onboarding:
//	  enabled: true
//	  policy_file: /etc/custos/capability-policy.json
//	  discovery_urls: ["https://agents.partner.example/"]
//	  profile: GDPR-STANDARD
//
// The agents onboarded are kept in the data directory (onboarded.json)
// and trusted again after a restart. A change needs a restart.
type Onboarding struct {
	Enabled bool `yaml:"enabled"`
	// PolicyFile is the CapabilityPolicy (JSON, ARSIA-Identity §8) the
	// requested capabilities are evaluated against. Required when enabled.
	PolicyFile string `yaml:"policy_file"`
	// DiscoveryURLs are the URL prefixes the gateway fetches an agent's
	// well-known endpoints under: an agent whose base URL starts with
	// none of them is refused before anything is fetched. Required when
	// enabled (https, or http to localhost).
	DiscoveryURLs []string `yaml:"discovery_urls"`
	// Profile is the compliance profile of the decision messages; empty
	// means GDPR-STANDARD.
	Profile string `yaml:"profile"`
	// FetchTimeout bounds each fetch of an agent's endpoints (10s when
	// zero).
	FetchTimeout time.Duration `yaml:"fetch_timeout"`
	// MaxInFlight caps the onboardings run at once (4 when zero); more
	// are answered 503 with Retry-After.
	MaxInFlight int `yaml:"max_in_flight"`
}

// DefaultOnboardingProfile is the decision messages' profile when
// onboarding.profile is empty.
const DefaultOnboardingProfile = "GDPR-STANDARD"

func (c *Config) checkOnboarding() []error {
	o := &c.Onboarding
	if o.FetchTimeout == 0 {
		o.FetchTimeout = DefaultOnboardingFetchTimeout
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultOnboardingInFlight
	}
	if o.Profile == "" {
		o.Profile = DefaultOnboardingProfile
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("onboarding."+format, a...)) }
	if o.FetchTimeout < 0 || o.FetchTimeout > time.Minute {
		bad("fetch_timeout %s: want more than 0 and at most 1m", o.FetchTimeout)
	}
	if o.MaxInFlight < 0 || o.MaxInFlight > MaxOnboardingInFlight {
		bad("max_in_flight %d: want 1 to %d", o.MaxInFlight, MaxOnboardingInFlight)
	}
	for i, p := range o.DiscoveryURLs {
		if _, err := onboard.ParsePrefix(p); err != nil {
			bad("discovery_urls[%d]: %v", i, err)
		}
	}
	if !o.Enabled {
		return errs
	}
	switch {
	case o.PolicyFile == "":
		bad("policy_file: required when onboarding is enabled")
	case len(o.DiscoveryURLs) == 0:
		bad("discovery_urls: required when onboarding is enabled (the prefixes the gateway may fetch from)")
	case !c.AuthorizationServer.Enabled:
		errs = append(errs, errors.New("onboarding needs authorization_server.enabled: an approval issues the agent's access token"))
	}
	return errs
}
