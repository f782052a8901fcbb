package conformance

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/go-jose/go-jose/v4"
)

// execSigning signs JCS(message without security) with the vector's Ed25519
// seed, compares the signature with crypto.signature_base64url when
// expected.signature_match_vector, and verifies the vector's own message
// with crypto.public_key_hex when expected.verify is set.
func execSigning(env *arsiaEnv, c *arsiaCase) error {
	v, err := env.vector(c)
	if err != nil {
		return err
	}
	vc, _ := v["crypto"].(map[string]any)
	msg, ok := v["message"].(map[string]any)
	if vc == nil || !ok {
		return fmt.Errorf("vector %v has no crypto or message", v["id"])
	}
	sec, _ := msg["security"].(map[string]any)
	kid, _ := sec["kid"].(string)
	if alg, _ := sec["alg"].(string); alg != sig.EdDSA {
		return fmt.Errorf("%w: vector algorithm %q", errUnsupported, alg)
	}

	if match, _ := c.Expected["signature_match_vector"].(bool); match {
		seed, err := hexField(vc, "private_key_hex")
		if err != nil {
			return err
		}
		signer, err := sig.NewEd25519Signer(seed)
		if err != nil {
			return err
		}
		signed, err := sig.Sign(msg, signer, kid)
		if err != nil {
			return fmt.Errorf("sign: %v", err)
		}
		got := signed["security"].(map[string]any)["sig"]
		if want, _ := vc["signature_base64url"].(string); got != want {
			return fmt.Errorf("signature differs:\n got  %v\n want %s", got, want)
		}
	}

	if want, ok := c.Expected["verify"].(bool); ok {
		pub, err := hexField(vc, "public_key_hex")
		if err != nil {
			return err
		}
		if len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("public_key_hex is %d bytes, want 32", len(pub))
		}
		keys := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: ed25519.PublicKey(pub), KeyID: kid, Use: "sig"},
		}})
		_, err = sig.Verify(context.Background(), msg, keys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}})
		switch {
		case want && err != nil:
			return fmt.Errorf("verify: %v", err)
		case !want && err == nil:
			return errors.New("verify: expected failure, signature verified")
		}
	}
	return nil
}

func hexField(m map[string]any, name string) ([]byte, error) {
	s, _ := m[name].(string)
	b, err := hex.DecodeString(s)
	if err != nil || s == "" {
		return nil, fmt.Errorf("%s: missing or not hex", name)
	}
	return b, nil
}

// execEncryption runs the payload-encryption cases (ARSIA-Core §5.3): it
// builds a request envelope from the case input, encrypts its payload to a
// fresh P-256 key, signs it (with the wrong key for the bad-signature
// cases), and checks what VerifyAndDecrypt says.
func execEncryption(env *arsiaEnv, c *arsiaCase) error {
	op := c.operation("")
	from, _ := c.Input["from_agent"].(string)
	to, _ := c.Input["to_agent"].(string)
	signerID, _ := c.Input["signer_agent_id"].(string)
	kid := from + "#key-1"

	fromKP, ok := env.keypairs[from]
	if !ok {
		return fmt.Errorf("no keypair for %s: %v", from, env.loadErr)
	}
	pub, err := hexField(fromKP, "public_key_hex")
	if err != nil {
		return err
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%s is not an Ed25519 keypair", from)
	}
	keys := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: ed25519.PublicKey(pub), KeyID: kid, Use: "sig"},
	}})

	switch op {
	case "decrypt_bad_signature", "decrypt_dual_fault":
		signerID, _ = c.Input["wrong_signer_agent_id"].(string)
	case "decrypt_and_verify", "decrypt_not_json_object":
	default:
		return fmt.Errorf("%w: encryption operation %q", errUnsupported, op)
	}
	signerKP, ok := env.keypairs[signerID]
	if !ok {
		return fmt.Errorf("no keypair for %s: %v", signerID, env.loadErr)
	}
	seed, err := hexField(signerKP, "private_key_hex")
	if err != nil {
		return err
	}
	signer, err := sig.NewEd25519Signer(seed)
	if err != nil {
		return err
	}

	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	recipient := &jose.JSONWebKey{Key: priv, KeyID: to + "#enc-1", Use: "enc"}

	payload, _ := c.Input["plaintext_payload"].(map[string]any)
	if payload == nil {
		payload = map[string]any{"type": "com.test.placeholder"}
	}
	request := encryptionRequest(from, to, payload)
	encrypted, err := sig.EncryptPayload(request, recipient, sig.ECDHES)
	if err != nil {
		return fmt.Errorf("encrypt: %v", err)
	}
	switch op {
	case "decrypt_dual_fault":
		jwe := encrypted["payload"].(string)
		encrypted["payload"], _, _ = strings.Cut(jwe, ".")
	case "decrypt_not_json_object":
		raw, _ := c.Input["non_object_json"].(string)
		jwe, err := rawJWE(recipient, []byte(raw))
		if err != nil {
			return err
		}
		encrypted["payload"] = jwe
	}
	signed, err := sig.Sign(encrypted, signer, kid)
	if err != nil {
		return fmt.Errorf("sign: %v", err)
	}

	v, err := sig.VerifyAndDecrypt(context.Background(), signed, keys,
		sig.VerifyOptions{Algorithms: []string{sig.EdDSA}},
		sig.DecryptOptions{Key: recipient, Algorithms: []string{sig.ECDHES}})
	var errs []string
	if err != nil {
		errs = append(errs, err.Error())
	}
	if err := expectValidity(c, errs); err != nil {
		return err
	}
	if err != nil {
		return nil
	}
	if want, ok := c.Expected["payload_type"]; ok && v.Payload["type"] != want {
		return fmt.Errorf("payload_type: got %v, want %v", v.Payload["type"], want)
	}
	if fields, ok := c.Expected["payload_fields"].(map[string]any); ok {
		for k, want := range fields {
			if !sameJSON(v.Payload[k], want) {
				return fmt.Errorf("payload_fields.%s: got %s, want %s", k, compactJSON(v.Payload[k]), compactJSON(want))
			}
		}
	}
	if !sameJSON(v.Payload, payload) {
		return fmt.Errorf("decrypted payload %s, want %s", compactJSON(v.Payload), compactJSON(payload))
	}
	return nil
}

// encryptionRequest is a request envelope as the reference SDK's
// create_request builds it, with capability com.test.encrypted.
func encryptionRequest(from, to string, payload map[string]any) map[string]any {
	now := time.Now().UTC()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	return map[string]any{
		"v":            "1.0",
		"id":           id,
		"ts":           now.Format("2006-01-02T15:04:05.000Z"),
		"from":         from,
		"to":           to,
		"intent":       "request",
		"expires_at":   now.Add(300 * time.Second).Format("2006-01-02T15:04:05.000Z"),
		"capabilities": []any{"com.test.encrypted"},
		"payload":      payload,
	}
}

// rawJWE encrypts arbitrary bytes, for envelopes whose plaintext is not an
// object, which EncryptPayload refuses to produce.
func rawJWE(recipient *jose.JSONWebKey, plaintext []byte) (string, error) {
	pub := recipient.Public()
	enc, err := jose.NewEncrypter(jose.A256GCM,
		jose.Recipient{Algorithm: jose.ECDH_ES, Key: pub.Key, KeyID: recipient.KeyID}, nil)
	if err != nil {
		return "", err
	}
	obj, err := enc.Encrypt(plaintext)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}
