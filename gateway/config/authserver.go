package config

import (
	"fmt"
	"time"
)

// Token lifetimes of the authorization server (authorization_server).
const (
	DefaultASTokenLifetime    = 5 * time.Minute
	DefaultASMaxTokenLifetime = time.Hour
	MaxASTokenLifetime        = 24 * time.Hour
)

// AuthorizationServer makes custos serve its own OAuth 2.0 authorization
// server (docs/authorization-server.md): agents exchange a client
// assertion signed with their ARSIA key for access tokens the gateway
// signs and trusts.
type AuthorizationServer struct {
	// Enabled mounts /.well-known/oauth-authorization-server and
	// /oauth/{token,introspect,revoke}.
	Enabled bool `yaml:"enabled"`
	// TokenLifetime is the lifetime of issued tokens (5m when zero).
	TokenLifetime time.Duration `yaml:"token_lifetime"`
	// MaxTokenLifetime caps any token issued (1h when zero; at most 24h).
	MaxTokenLifetime time.Duration `yaml:"max_token_lifetime"`
}

// check returns what is wrong with a, and fills the defaults. inboxMax
// is tokens.max_lifetime: the inbox would refuse longer tokens.
func (a *AuthorizationServer) check(inboxMax time.Duration) []error {
	var errs []error
	if a.TokenLifetime == 0 {
		a.TokenLifetime = DefaultASTokenLifetime
	}
	if a.MaxTokenLifetime == 0 {
		a.MaxTokenLifetime = DefaultASMaxTokenLifetime
	}
	switch {
	case a.TokenLifetime < time.Second:
		errs = append(errs, fmt.Errorf("token_lifetime %s: want at least 1s", a.TokenLifetime))
	case a.MaxTokenLifetime > MaxASTokenLifetime:
		errs = append(errs, fmt.Errorf("max_token_lifetime %s: at most %s", a.MaxTokenLifetime, MaxASTokenLifetime))
	case a.TokenLifetime > a.MaxTokenLifetime:
		errs = append(errs, fmt.Errorf("token_lifetime %s exceeds max_token_lifetime %s", a.TokenLifetime, a.MaxTokenLifetime))
	case a.Enabled && inboxMax > 0 && a.TokenLifetime > inboxMax:
		errs = append(errs, fmt.Errorf("token_lifetime %s exceeds tokens.max_lifetime %s: the inbox would refuse the tokens issued", a.TokenLifetime, inboxMax))
	}
	return errs
}
