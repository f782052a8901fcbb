package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
)

// jwksSource is a JWKS read from a file or fetched from a URL: the
// verification keys and the encryption keys it lists.
type jwksSource interface {
	sig.KeySource
	sig.EncryptionKeySource
}

// openJWKS opens ref, an http(s):// URL of a JWKS (cached per
// Cache-Control) or a JWKS file.
func openJWKS(ref string) (jwksSource, error) {
	if strings.HasPrefix(ref, "https://") || strings.HasPrefix(ref, "http://") {
		return sig.NewHTTPJWKS(ref, nil)
	}
	data, err := os.ReadFile(ref)
	if err != nil {
		return nil, err
	}
	s, err := sig.ParseStaticJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return s, nil
}

// encryptToJWKS encrypts the payload of env to recipient's encryption key
// ("use": "enc") listed in the JWKS at ref (ARSIA-Core §5.3, ECDH-ES with
// A256GCM). The envelope is to be signed afterwards.
func encryptToJWKS(ctx context.Context, env map[string]any, recipient, ref string) (map[string]any, error) {
	keys, err := openJWKS(ref)
	if err != nil {
		return nil, fmt.Errorf("--encrypt-to: %w", err)
	}
	k, err := keys.EncryptionKey(ctx, recipient)
	if errors.Is(err, sig.ErrNoEncryptionKey) {
		return nil, fmt.Errorf(`--encrypt-to %s lists no encryption key of %s (an EC P-256 JWK with "use": "enc" and a kid %s#label)`, ref, recipient, recipient)
	}
	if err != nil {
		return nil, fmt.Errorf("--encrypt-to: %w", err)
	}
	return sig.EncryptPayload(env, k, sig.ECDHES)
}

// decryptVerified decrypts and prints the payload of an encrypted
// envelope whose signature verified, with the private JWK at keyFile.
func decryptVerified(w io.Writer, name string, v *sig.Verified, keyFile string) error {
	if !v.Encrypted {
		return fmt.Errorf("%s: the payload is not encrypted; --decrypt-key has nothing to decrypt", name)
	}
	if keyFile == "" {
		fmt.Fprintf(w, "%s: the payload is encrypted (%s, %s); give your private encryption key with --decrypt-key to read it\n", name, v.EncAlg, v.EncMethod)
		return nil
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	var k jose.JSONWebKey
	if err := json.Unmarshal(data, &k); err != nil || k.IsPublic() {
		return fmt.Errorf("%s: not a private JWK", keyFile)
	}
	payload, err := sig.Decrypt(v, sig.DecryptOptions{Key: &k, Algorithms: []string{sig.ECDHES, sig.ECDHESA256KW}})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(w, "%s: payload decrypted (%s, %s, key %s):\n", name, v.EncAlg, v.EncMethod, k.KeyID)
	return writeCanonical(w, payload)
}
