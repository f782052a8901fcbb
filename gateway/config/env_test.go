package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestApplyEnviron(t *testing.T) {
	c := Default()
	err := c.ApplyEnviron([]string{
		"CUSTOS_TOKENS__ACCEPT_ANY_JTI=true",
		"CUSTOS_TOKENS__PROOF_ALGORITHMS=[EdDSA]",
		"CUSTOS_LIMITS__PER_ADDRESS__BURST=7",
		"CUSTOS_OVERSIGHT__TTL=5m",
		"CUSTOS_HANDLERS={demo.echo: {type: echo}, billing.get: {type: http, url: 'https://b/x', headers: {Authorization: 'env:BILLING_AUTH'}}}",
		"CUSTOS_SENDERS=[{agent: 'agent:acme.advisor', capabilities: ['demo.*']}]",
		"CUSTOS_AGENT=agent:acme.gateway",
		"CUSTOS_CONFIG=/etc/custos.yaml", // not a setting
		"CUSTOS_TEST_POSTGRES_DSN=postgres://x",
		"HOME=/root",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Tokens.AcceptAnyJTI || len(c.Tokens.ProofAlgorithms) != 1 || c.Limits.PerAddress.Burst != 7 ||
		c.Limits.PerAddress.PerSecond != 100 || c.Oversight.TTL != 5*time.Minute || c.Oversight.ReviewWithin != 24*time.Hour ||
		c.Handlers["billing.get"].Headers["Authorization"] != "env:BILLING_AUTH" || len(c.Senders) != 1 || c.Agent != "agent:acme.gateway" {
		t.Fatalf("%+v", c)
	}
}

func TestApplyEnvironRefuses(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"CUSTOS_TOKENS__MODEE=bearer", "names no setting"},
		{"CUSTOS_LIMITS__PER_ADDRESS__NOPE=1", "names no setting"},
		{"CUSTOS_HANDLERS={x: {typo: 1}}", "typo"},
		{"CUSTOS_LIMITS__CONNECTIONS=many", "cannot unmarshal"},
		{"CUSTOS_OVERSIGHT__TTL=[1", "not a YAML value"},
		{"CUSTOS_MAX_BODY=big", "not a number of bytes"},
	} {
		c := Default()
		err := c.ApplyEnviron([]string{tc.env})
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.env, err, tc.want)
		}
	}
}

func TestNewSettingsChecked(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"trust: {algorithms: [HS256]}", `trust.algorithms: "HS256"`},
		{"trust: {algorithms: [EdDSA, EdDSA]}", "listed twice"},
		{"trust: {min_refresh_interval: -1s}", "min_refresh_interval"},
		{"tokens: {proof_algorithms: [RS256]}", "not accepted for DPoP"},
		{"tokens: {token_algorithms: [none]}", "token_algorithms"},
		{"handlers: {demo.echo: {type: echo, headers: {A: b}}}", "only http, a2a and an mcp url send headers"},
		{"handlers: {x.y: {type: http, url: 'https://u', headers: {'Bad Name': b}}}", "not a header name"},
		{"handlers: {x.y: {type: http, url: 'https://u', headers: {A: 'env:CUSTOS_TEST_SURELY_UNSET'}}}", "CUSTOS_TEST_SURELY_UNSET is not set"},
		{"handlers: {x.y: {type: http, url: 'https://u', max_response_bytes: -1}}", "max_response_bytes"},
		{"handlers: {x.y: {type: echo, max_response_bytes: 10}}", "only http, a2a and exec"},
		{"handlers: {x.y: {type: http, url: 'https://u', poll: 1s}}", "only an a2a handler polls"},
	} {
		c := Default()
		if err := c.Decode(strings.NewReader(tc.yaml), "t.yaml"); err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		err := c.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	c := Default()
	t.Setenv("CUSTOS_TEST_AUTH", "Bearer abc")
	yml := "handlers: {x.y: {type: a2a, url: 'https://u', poll: 1s, max_response_bytes: 100, headers: {Authorization: 'env:CUSTOS_TEST_AUTH'}}}\n" +
		"tokens: {accept_any_jti: true, token_algorithms: [ES256]}\ntrust: {algorithms: [EdDSA]}"
	if err := c.Decode(strings.NewReader(yml), "t.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	h, err := c.Handlers["x.y"].HeaderValues()
	if err != nil || h.Get("Authorization") != "Bearer abc" {
		t.Fatalf("%v %v", h, err)
	}
}
