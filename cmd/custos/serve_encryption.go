package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
)

// gatewayEncryptionKey loads the gateway's encryption key from
// DATA/gateway.enc.jwk.json, creating an EC P-256 key (mode 0600, kid
// AGENT#enc-1, "use": "enc") on first run, as gatewayKey does for the
// signing key. Senders encrypt payloads to its public half, which the
// gateway publishes in its JWKS (ARSIA-Core §5.3). A key file readable by
// others, or one that is not an EC P-256 private key of this agent, is
// refused.
func gatewayEncryptionKey(dir, agent string) (*jose.JSONWebKey, error) {
	path := filepath.Join(dir, "gateway.enc.jwk.json")
	kid := agent + "#enc-1"
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		if err := writePrivateJWK(path, jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: sig.ECDHES, Use: "enc"}, false); err != nil {
			return nil, err
		}
		if data, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
		}
	}
	var priv jose.JSONWebKey
	if err := json.Unmarshal(data, &priv); err != nil || priv.IsPublic() {
		return nil, fmt.Errorf("%s: not a private JWK", path)
	}
	if priv.KeyID != kid {
		return nil, fmt.Errorf("%s is the key of %s, not of %s", path, priv.KeyID, kid)
	}
	if k, ok := priv.Key.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() || priv.Use != "enc" {
		return nil, fmt.Errorf(`%s: not an EC P-256 key with "use": "enc"`, path)
	}
	return &priv, nil
}
