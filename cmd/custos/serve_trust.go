package main

import (
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/config"
)

// newTrust builds the key source of the configured senders' keys and the
// trust policy (nil when none is configured).
func newTrust(t config.Trust) (sig.KeySource, gateway.TrustPolicy, error) {
	var sources sig.KeySources
	for _, f := range t.JWKSFiles {
		sources = append(sources, sig.NewJWKSFile(f))
	}
	for _, u := range t.JWKSURLs {
		s, err := sig.NewHTTPJWKS(u, nil)
		if err != nil {
			return nil, nil, err
		}
		sources = append(sources, s)
	}
	return sources, nil, nil
}
