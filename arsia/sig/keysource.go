package sig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

// KeySource resolves a kid to the public verification key it names.
//
// Key returns a public JWK whose Key is an ed25519.PublicKey,
// *ecdsa.PublicKey or *rsa.PublicKey. It returns an error wrapping
// ErrUnknownKid when there is no such key, ErrRevokedKey when the key has
// been withdrawn and ErrKeySource when the keys cannot be obtained. The
// returned key must not be modified.
//
// Verify checks the key against the algorithm itself, so a KeySource need
// not know which algorithm an envelope claims.
type KeySource interface {
	Key(ctx context.Context, kid string) (*jose.JSONWebKey, error)
}

// KeySourceFunc adapts a function to KeySource.
type KeySourceFunc func(ctx context.Context, kid string) (*jose.JSONWebKey, error)

// Key calls f.
func (f KeySourceFunc) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	return f(ctx, kid)
}

// MaxJWKSBytes caps a JWKS document read from a file or over HTTP.
const MaxJWKSBytes = 1 << 20

// errAmbiguousKid is an ErrUnknownKid that a refresh would not cure.
var errAmbiguousKid = fmt.Errorf("%w: listed more than once", ErrUnknownKid)

// keySet is the verification keys of one copy of a JWKS, by kid.
type keySet struct {
	keys      map[string]*jose.JSONWebKey
	ambiguous map[string]bool // kids listed by more than one usable key
	// enc are the encryption keys ("use": "enc", EC P-256), in the order
	// listed.
	enc []*jose.JSONWebKey
}

func (s *keySet) lookup(kid string) (*jose.JSONWebKey, error) {
	if s.ambiguous[kid] {
		return nil, fmt.Errorf("%w: %q", errAmbiguousKid, kid)
	}
	if k, ok := s.keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownKid, kid)
}

func (s *keySet) add(k *jose.JSONWebKey) {
	if _, dup := s.keys[k.KeyID]; dup {
		s.ambiguous[k.KeyID] = true
		return
	}
	s.keys[k.KeyID] = k
}

func newKeySet() *keySet {
	return &keySet{keys: map[string]*jose.JSONWebKey{}, ambiguous: map[string]bool{}}
}

// privateMembers are JWK members that carry secret key material
// (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// parseKeySet decodes a JWKS document strictly (duplicate member names
// refused, as everywhere at the trust boundary) and keeps the keys usable
// for verification: a kid, "use" absent or "sig", "key_ops" absent or
// containing "verify", a key type this package verifies and, when prefix is
// not empty, a kid starting with it. Other keys, such as X25519 encryption
// keys, are ignored as RFC 7517 §5 asks. A document carrying private or
// symmetric key material is refused whole: publishing it is a leak, not a
// key to use.
func parseKeySet(data []byte, prefix string) (*keySet, error) {
	if len(data) > MaxJWKSBytes {
		return nil, fmt.Errorf("%w: JWKS larger than %d bytes", ErrKeySource, MaxJWKSBytes)
	}
	doc, err := jcs.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: JWKS: %w", ErrKeySource, err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: JWKS is not an object", ErrKeySource)
	}
	list, ok := top["keys"].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: JWKS has no \"keys\" array", ErrKeySource)
	}
	set := newKeySet()
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: JWKS key is not an object", ErrKeySource)
		}
		for _, p := range privateMembers {
			if _, secret := m[p]; secret {
				return nil, fmt.Errorf("%w: JWKS contains private or symmetric key material", ErrKeySource)
			}
		}
		if m["use"] == "enc" {
			if k := encryptionJWK(m, prefix); k != nil {
				set.enc = append(set.enc, k)
			}
			continue
		}
		if !usableForVerify(m) {
			continue
		}
		raw, err := json.Marshal(m)
		if err != nil {
			continue
		}
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue // unsupported kty or curve, or invalid parameters
		}
		if accept(&k, prefix) {
			set.add(&k)
		}
	}
	return set, nil
}

// usableForVerify applies "use" and "key_ops" from the raw JWK members.
func usableForVerify(m map[string]any) bool {
	if use, present := m["use"]; present && use != "sig" {
		return false
	}
	if ops, present := m["key_ops"]; present {
		list, ok := ops.([]any)
		if !ok {
			return false
		}
		for _, op := range list {
			if op == "verify" {
				return true
			}
		}
		return false
	}
	return true
}

// accept keeps a parsed public key whose kid is set and carries prefix.
func accept(k *jose.JSONWebKey, prefix string) bool {
	if k.KeyID == "" || !strings.HasPrefix(k.KeyID, prefix) || !k.IsPublic() || !k.Valid() {
		return false
	}
	_, err := algorithmFor(k.Key)
	return err == nil
}

// StaticJWKS is a fixed set of verification keys. It has no notion of
// revocation: a key it does not hold is simply unknown.
type StaticJWKS struct {
	set *keySet
}

// NewStaticJWKS keeps the verification keys of set (see ParseStaticJWKS for
// which keys count). Private keys in set are reduced to their public halves,
// which lets a program verify its own envelopes from the JWK it signs with.
func NewStaticJWKS(set jose.JSONWebKeySet) *StaticJWKS {
	s := newKeySet()
	for i := range set.Keys {
		if set.Keys[i].Use == "enc" {
			if pub := set.Keys[i].Public(); pub.KeyID != "" && isP256(&pub) {
				s.enc = append(s.enc, &pub)
			}
			continue
		}
		if set.Keys[i].Use != "" && set.Keys[i].Use != "sig" {
			continue
		}
		pub := set.Keys[i].Public()
		if accept(&pub, "") {
			s.add(&pub)
		}
	}
	return &StaticJWKS{set: s}
}

// ParseStaticJWKS decodes a JWKS document ({"keys": [...]}) strictly. Keys
// with "use" other than "sig", "key_ops" without "verify", no kid, or a key
// type other than OKP Ed25519, EC P-256 or RSA 2048–4096 bits are ignored; a
// kid listed twice resolves to ErrUnknownKid. A document with private or
// symmetric key material is refused.
func ParseStaticJWKS(data []byte) (*StaticJWKS, error) {
	set, err := parseKeySet(data, "")
	if err != nil {
		return nil, err
	}
	return &StaticJWKS{set: set}, nil
}

// Key returns the key named kid.
func (s *StaticJWKS) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	return s.set.lookup(kid)
}

// keyHistory tracks successive copies of a key set and the kids that
// disappeared from them. Revocation is sticky: a kid that was withdrawn
// stays revoked even if a later copy lists it again, because a compromised
// key coming back is more likely an attack or a stale mirror than a cure.
// Restart the process (or build a new source) to forgive it.
type keyHistory struct {
	current *keySet
	seen    map[string]bool
	revoked map[string]bool
}

func (h *keyHistory) replace(s *keySet) {
	if h.seen == nil {
		h.seen, h.revoked = map[string]bool{}, map[string]bool{}
	}
	for kid := range h.seen {
		if _, still := s.keys[kid]; !still && !s.ambiguous[kid] {
			h.revoked[kid] = true
		}
	}
	for kid := range s.keys {
		h.seen[kid] = true
	}
	h.current = s
}

func (h *keyHistory) lookup(kid string) (*jose.JSONWebKey, error) {
	if h.revoked[kid] {
		return nil, fmt.Errorf("%w: %q", ErrRevokedKey, kid)
	}
	if h.current == nil {
		return nil, fmt.Errorf("%w: no key set loaded", ErrKeySource)
	}
	return h.current.lookup(kid)
}

// isUnknown reports whether err means the kid was simply not found, which
// is worth a refresh; revocation and ambiguity are not.
func isUnknown(err error) bool {
	return errors.Is(err, ErrUnknownKid) && !errors.Is(err, errAmbiguousKid)
}

// KeySources asks each source in turn; the first that knows the kid
// answers. A source saying the key is revoked ends the search: another
// source must not bring a withdrawn key back. With no source, every kid is
// unknown.
type KeySources []KeySource

// Key implements KeySource.
func (ks KeySources) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	var errs []error
	for _, s := range ks {
		k, err := s.Key(ctx, kid)
		if err == nil || errors.Is(err, ErrRevokedKey) {
			return k, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no key sources", ErrUnknownKid)
	}
	return nil, errors.Join(errs...)
}
