package sig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"
)

// ErrNoEncryptionKey: the agent publishes no key this package can encrypt
// to (a JWK with "use": "enc", EC P-256, and a kid "<agent id>#label").
var ErrNoEncryptionKey error = &sigError{"sig: the agent publishes no encryption key"}

// EncryptionKeySource finds the key to encrypt a payload to an agent with
// (ARSIA-Core §5.3: the recipient's JWKS entry with "use": "enc").
//
// EncryptionKey returns the public key, the first such key the agent's
// JWKS lists, or an error wrapping ErrNoEncryptionKey when it lists none,
// or ErrKeySource when the keys cannot be obtained. The returned key must
// not be modified.
type EncryptionKeySource interface {
	EncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, error)
}

// encryptionJWK parses a raw JWKS member with "use": "enc" into an EC
// P-256 public key whose kid starts with prefix, or returns nil: keys of
// other types (an OKP X25519 key, which this package cannot use), without
// a kid, or whose key_ops exclude key agreement, are ignored.
func encryptionJWK(m map[string]any, prefix string) *jose.JSONWebKey {
	if ops, present := m["key_ops"]; present {
		list, _ := ops.([]any)
		if !slices.ContainsFunc(list, func(op any) bool {
			return op == "deriveKey" || op == "deriveBits" || op == "encrypt" || op == "wrapKey"
		}) {
			return nil
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		return nil
	}
	if k.KeyID == "" || !strings.HasPrefix(k.KeyID, prefix) || !k.IsPublic() || !k.Valid() || !isP256(&k) {
		return nil
	}
	return &k
}

func isP256(k *jose.JSONWebKey) bool {
	switch key := k.Key.(type) {
	case *ecdsa.PublicKey:
		return key.Curve == elliptic.P256()
	case *ecdsa.PrivateKey:
		return key.Curve == elliptic.P256()
	}
	return false
}

// encryptionKey is agent's first encryption key in the set.
func (s *keySet) encryptionKey(agent string) (*jose.JSONWebKey, error) {
	prefix := agent + "#"
	for _, k := range s.enc {
		if label, ok := strings.CutPrefix(k.KeyID, prefix); ok && label != "" {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoEncryptionKey, agent)
}

func (h *keyHistory) encryptionKey(agent string) (*jose.JSONWebKey, error) {
	if h.current == nil {
		return nil, fmt.Errorf("%w: no key set loaded", ErrKeySource)
	}
	return h.current.encryptionKey(agent)
}

// EncryptionKey returns agent's encryption key.
func (s *StaticJWKS) EncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	return s.set.encryptionKey(agent)
}

// EncryptionKey returns agent's encryption key from the current version
// of the file.
func (f *JWKSFile) EncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f.history.encryptionKey(agent)
}

// EncryptionKey returns agent's encryption key, fetching the set when it
// is missing or stale (not again for a set that lists none: that is not
// an unknown kid a rotation explains).
func (h *HTTPJWKS) EncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, error) {
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.release()
	if _, err := h.fresh(ctx, h.opts.Now()); err != nil {
		return nil, err
	}
	return h.history.encryptionKey(agent)
}

// EncryptionKey returns the discovered agent's encryption key; for any
// other agent there is none.
func (d *Discovery) EncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, error) {
	if agent != d.agentID {
		return nil, fmt.Errorf("%w: %q is not %s", ErrNoEncryptionKey, agent, d.agentID)
	}
	src, err := d.source(ctx)
	if err != nil {
		return nil, err
	}
	return src.EncryptionKey(ctx, agent)
}

// EncryptionKey asks each source that is an EncryptionKeySource in turn;
// the first that has a key for agent answers.
func (ks KeySources) EncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, error) {
	var errs []error
	for _, s := range ks {
		es, ok := s.(EncryptionKeySource)
		if !ok {
			continue
		}
		k, err := es.EncryptionKey(ctx, agent)
		if err == nil {
			return k, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoEncryptionKey, agent)
	}
	return nil, errors.Join(errs...)
}

var (
	_ EncryptionKeySource = (*StaticJWKS)(nil)
	_ EncryptionKeySource = (*JWKSFile)(nil)
	_ EncryptionKeySource = (*HTTPJWKS)(nil)
	_ EncryptionKeySource = (*Discovery)(nil)
	_ EncryptionKeySource = KeySources(nil)
)
