package config

import (
	"strings"
	"testing"
	"time"
)

func TestAuthorizationServer(t *testing.T) {
	for name, tc := range map[string]struct {
		yml string
		ok  bool
	}{
		"own tokens only":   {"tokens: {mode: dpop}\nauthorization_server: {enabled: true}\n", true},
		"disabled, no iss":  {"tokens: {mode: dpop}\nauthorization_server: {enabled: false}\n", false},
		"lifetimes":         {"authorization_server: {enabled: true, token_lifetime: 2m, max_token_lifetime: 24h}\n", true},
		"max above 24h":     {"authorization_server: {enabled: true, max_token_lifetime: 25h}\n", false},
		"lifetime over max": {"authorization_server: {enabled: true, token_lifetime: 2h}\n", false},
		"sub-second":        {"authorization_server: {enabled: true, token_lifetime: 10ms}\n", false},
		"inbox max shorter": {"tokens: {mode: bearer, max_lifetime: 1m}\nauthorization_server: {enabled: true}\n", false},
		"inbox max longer":  {"tokens: {mode: bearer, max_lifetime: 10m}\nauthorization_server: {enabled: true}\n", true},
		"unknown key":       {"authorization_server: {enabled: true, lifetime: 5m}\n", false},
	} {
		c := Default()
		err := c.Decode(strings.NewReader(tc.yml), "custos.yaml")
		if err == nil {
			err = c.Check()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", name, err, tc.ok)
		}
	}
	c := Default()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if a := c.AuthorizationServer; a.Enabled || a.TokenLifetime != 5*time.Minute || a.MaxTokenLifetime != time.Hour {
		t.Fatalf("defaults %+v", a)
	}
}
