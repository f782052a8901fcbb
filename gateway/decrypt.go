package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/jcs"
)

// Encrypted payloads (ARSIA-Core §5.3). The sender encrypts the payload
// object to the gateway's key ("use": "enc" in the gateway's JWKS) as a
// compact JWE, ECDH-ES with A256GCM, and signs the envelope over the JWE:
// encrypt, then sign. The gateway verifies the signature first (identify),
// then decrypts (decrypt, here), and from then on the request is the
// decrypted one: validation, authorization, the approval digest and the
// handler see the plaintext call. Every reply to it is encrypted to the
// sender's own "use": "enc" key (sealed).

// decryptAlgorithms are the key agreements accepted for a request: the one
// ARSIA recommends.
var decryptAlgorithms = []string{sig.ECDHES}

// decrypt is step 2b: an encrypted request, whose signature verified,
// becomes the request it encrypts. Before anything is decrypted the
// declared algorithms are checked and the sender's encryption key found
// (its replies will be encrypted to it: a sender that publishes none is
// refused now, before anything runs, rather than answered in clear). A
// refusal is unauthorized (Core §5.3) with details.reason saying which
// check failed, and is not encrypted: it says nothing of the payload. The
// returned context encrypts every later reply to the sender (withReplyKey).
func (g *Gateway) decrypt(ctx context.Context, a *admission) (context.Context, *arsia.Error) {
	if !a.verified.Encrypted {
		return ctx, nil
	}
	// Core §8.3: a stale or future message is refused before anything
	// else is read of it, its ciphertext included.
	if e := arsia.CheckFreshness(a.env, g.o.Profiles, a.now); e != nil {
		return ctx, e
	}
	a.stages.next(stageDecrypt)
	defer a.stages.done()
	a.rec.Details = withDetail(a.rec.Details, "encrypted", true)
	refuse := func(reason, words string) *arsia.Error {
		return &arsia.Error{Code: arsia.CodeUnauthorized, Description: words,
			Details: map[string]any{"reason": reason, "field": "/payload"}}
	}
	if g.o.Decryption == nil {
		return ctx, refuse("encryption_not_supported", "This gateway publishes no encryption key; send the payload unencrypted.")
	}
	if !slices.Contains(decryptAlgorithms, a.verified.EncAlg) {
		return ctx, refuse("enc_alg_not_allowed", "security.enc_alg "+quoteText(a.verified.EncAlg)+" is not accepted; use "+sig.ECDHES+".")
	}
	if a.verified.EncMethod != sig.A256GCM {
		return ctx, refuse("enc_method_not_allowed", "security.enc_method "+quoteText(a.verified.EncMethod)+" is not accepted; use "+sig.A256GCM+".")
	}
	if _, ok := a.verified.Envelope["payload"].(string); !ok {
		return ctx, refuse("jwe_malformed", "security.encrypted is true but the payload is not a JWE compact serialization.")
	}
	replyKey, e := g.senderEncryptionKey(ctx, a.from)
	if e != nil {
		return ctx, e
	}
	plain, err := sig.Decrypt(a.verified, sig.DecryptOptions{Key: g.o.Decryption, Algorithms: decryptAlgorithms, RequireKeyID: true})
	switch {
	case errors.Is(err, sig.ErrWrongRecipient):
		return ctx, refuse("jwe_wrong_key", "The payload is not encrypted to this gateway's key "+g.o.Decryption.KeyID+" (the JWE header must name it as kid).")
	case errors.Is(err, sig.ErrPlaintextNotJSON):
		return ctx, refuse("jwe_plaintext_not_json", "The decrypted payload is not valid JSON.")
	case errors.Is(err, sig.ErrPlaintextNotObject):
		return ctx, refuse("jwe_plaintext_not_object", "The decrypted payload is not a JSON object (got array or primitive).")
	case err != nil:
		// A JWE that does not parse, was tampered with, or was encrypted
		// to another key under this key's kid: AES-GCM cannot tell.
		return ctx, refuse("jwe_decryption_failed", "The encrypted payload could not be decrypted: it is malformed, altered, or encrypted to another key.")
	}
	if h, err := jcs.DigestValue(plain); err == nil {
		a.rec.Details["plaintext_hash"] = h
	}
	a.env = decrypted(a.env, plain)
	return withReplyKey(ctx, replyKey), nil
}

// decrypted is env with its payload the decrypted object and its security
// member without the encryption members: the request the sender
// encrypted, as the steps after decrypt read it.
func decrypted(env map[string]any, payload map[string]any) map[string]any {
	out := make(map[string]any, len(env))
	for k, v := range env {
		out[k] = v
	}
	out["payload"] = payload
	if sec, ok := env["security"].(map[string]any); ok {
		s := make(map[string]any, 3)
		for _, k := range []string{"alg", "kid", "sig"} {
			if v, ok := sec[k]; ok {
				s[k] = v
			}
		}
		out["security"] = s
	}
	return out
}

// senderEncryptionKey is the key the replies to agent's encrypted request
// are encrypted to: the "use": "enc" key of its JWKS.
func (g *Gateway) senderEncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, *arsia.Error) {
	var (
		k   *jose.JSONWebKey
		err = fmt.Errorf("%w: no encryption key source", sig.ErrNoEncryptionKey)
	)
	src := g.o.EncryptionKeys
	if src == nil {
		// The trust store in force: a reload that changes it changes
		// where senders' encryption keys are found too.
		src, _ = g.policy().Keys.(sig.EncryptionKeySource)
	}
	if src != nil {
		k, err = src.EncryptionKey(ctx, agent)
	}
	if err == nil {
		return k, nil
	}
	g.log(ctx).WarnContext(ctx, "no encryption key for the sender's replies", "sender", agent, "err", err)
	if errors.Is(err, sig.ErrNoEncryptionKey) || errors.Is(err, sig.ErrRevokedKey) {
		return nil, &arsia.Error{Code: arsia.CodeUnauthorized, Err: err,
			Description: "The reply to an encrypted request is encrypted to the sender, and " + agent +
				" publishes no usable encryption key (an EC P-256 JWK with \"use\": \"enc\" in its JWKS); nothing ran.",
			Details: map[string]any{"reason": "sender_encryption_key_missing", "field": "/payload"}}
	}
	return nil, &arsia.Error{Code: arsia.CodeServiceUnavailable, Err: err,
		Description: "The sender's encryption key cannot be obtained now; retry later. Nothing ran.",
		Details:     map[string]any{"reason": "sender_encryption_key_unavailable"}}
}

// resealed is ctx encrypting the replies to sender's encrypted request
// again, for an exchange moved on without the request (resumed after its
// approval, reconciled): the sender's current encryption key.
func (g *Gateway) resealed(ctx context.Context, sender string) (context.Context, *arsia.Error) {
	k, e := g.senderEncryptionKey(ctx, sender)
	if e != nil {
		return ctx, e
	}
	return withReplyKey(ctx, k), nil
}

// checkDecryptionKey checks Options.Decryption.
func checkDecryptionKey(k *jose.JSONWebKey, agent string) error {
	priv, ok := k.Key.(*ecdsa.PrivateKey)
	switch {
	case !ok || priv.Curve != elliptic.P256():
		return errors.New("gateway: the decryption key must be an EC P-256 private key")
	case k.Use != "" && k.Use != "enc":
		return fmt.Errorf("gateway: the decryption key has \"use\": %q, not \"enc\"", k.Use)
	case !strings.HasPrefix(k.KeyID, agent+"#") || k.KeyID == agent+"#":
		return fmt.Errorf("gateway: the decryption key's kid %q is not %s#label", k.KeyID, agent)
	}
	return nil
}

// withDetail sets details[k] = v, making details when nil.
func withDetail(details map[string]any, k string, v any) map[string]any {
	if details == nil {
		details = map[string]any{}
	}
	details[k] = v
	return details
}

// replyKeyCtx carries the key the replies of a request are encrypted to.
type replyKeyCtx struct{}

// withReplyKey makes every reply signed with ctx (Gateway.sign) encrypted
// to k.
func withReplyKey(ctx context.Context, k *jose.JSONWebKey) context.Context {
	return context.WithValue(ctx, replyKeyCtx{}, k)
}

// replyKeyOf is the key withReplyKey set, nil for a reply in clear.
func replyKeyOf(ctx context.Context) *jose.JSONWebKey {
	k, _ := ctx.Value(replyKeyCtx{}).(*jose.JSONWebKey)
	return k
}

// encryptsReplies reports whether ctx encrypts the replies it signs.
func encryptsReplies(ctx context.Context) bool { return replyKeyOf(ctx) != nil }
