package auth

import (
	"context"
	"encoding/json"

	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

// TokenKeys resolves the kid of an access token to the authorization
// server's public verification key (its JWKS).
//
// The method set is that of sig.KeySource, so the key sources of package
// arsia/sig (StaticJWKS, JWKSFile, HTTPJWKS) work here unchanged.
// Key returns an error when the kid is unknown or the keys cannot be
// obtained; ValidateAccessToken reports either as ErrUnknownKey. It must
// honour ctx. The returned key must not be modified.
type TokenKeys interface {
	Key(ctx context.Context, kid string) (*jose.JSONWebKey, error)
}

// StaticKeys is a fixed set of verification keys, by kid.
type StaticKeys struct {
	keys      map[string]jose.JSONWebKey
	ambiguous map[string]bool
}

// NewStaticKeys keeps the usable verification keys of set: those with a
// kid, "use" absent or "sig", and an Ed25519, P-256 or RSA (2048–4096
// bits) key. Private keys are reduced to their public halves. A kid listed
// twice resolves to nothing, since which key it means is unclear.
func NewStaticKeys(set jose.JSONWebKeySet) *StaticKeys {
	s := &StaticKeys{keys: map[string]jose.JSONWebKey{}, ambiguous: map[string]bool{}}
	for _, k := range set.Keys {
		if k.KeyID == "" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		pub := k.Public()
		if !pub.Valid() {
			continue
		}
		if _, err := algorithmFor(pub.Key); err != nil {
			continue
		}
		if _, dup := s.keys[k.KeyID]; dup {
			s.ambiguous[k.KeyID] = true
			continue
		}
		s.keys[k.KeyID] = pub
	}
	return s
}

// ParseStaticKeys decodes a JWKS document ({"keys": [...]}) strictly
// (duplicate member names refused) and keeps its usable keys as
// NewStaticKeys does; keys of other types are skipped, as RFC 7517 §5
// asks. A document that carries private or symmetric key material is
// refused whole: a published private key is a leak, not a key to trust.
func ParseStaticKeys(data []byte) (*StaticKeys, error) {
	doc, err := (&jcs.Options{MaxDepth: 8, MaxSize: 1 << 20}).Decode(data)
	if err != nil {
		return nil, failCause(ErrInvalidJWK, err, "JWKS")
	}
	top, _ := doc.(map[string]any)
	list, ok := top["keys"].([]any)
	if !ok {
		return nil, fail(ErrInvalidJWK, `JWKS is not an object with a "keys" array`)
	}
	var set jose.JSONWebKeySet
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fail(ErrInvalidJWK, "JWKS key is not an object")
		}
		for _, p := range privateMembers {
			if _, secret := m[p]; secret {
				return nil, fail(ErrInvalidJWK, "JWKS contains private or symmetric key material")
			}
		}
		raw, err := json.Marshal(m)
		if err != nil {
			continue
		}
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue // unsupported key type or curve
		}
		set.Keys = append(set.Keys, k)
	}
	return NewStaticKeys(set), nil
}

// Key returns the key named kid.
func (s *StaticKeys) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.ambiguous[kid] {
		return nil, fail(ErrUnknownKey, "kid %s is listed more than once", pyRepr(kid))
	}
	k, ok := s.keys[kid]
	if !ok {
		return nil, fail(ErrUnknownKey, "no key with kid %s", pyRepr(kid))
	}
	return &k, nil
}
