package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"

	"github.com/custos-runtime/custos/arsia/sig"
)

// CheckpointSigner signs the audit log's checkpoints (audit.Log.Checkpoint)
// with the gateway's key: the statement's raw signature, base64url without
// padding, as ARSIA signs envelopes.
type CheckpointSigner struct {
	Signer sig.Signer
	KID    string
}

// SignCheckpoint implements audit.CheckpointSigner.
func (c CheckpointSigner) SignCheckpoint(statement []byte) (string, string, error) {
	raw, err := c.Signer.SignMessage(statement)
	if err != nil {
		return "", "", err
	}
	return c.KID, base64.RawURLEncoding.EncodeToString(raw), nil
}

// CheckpointKeys checks checkpoint signatures with the keys a KeySource
// resolves (the gateway's JWKS): Ed25519 and ECDSA P-256 keys, as the
// gateway signs with.
type CheckpointKeys struct {
	Keys sig.KeySource
}

// VerifyCheckpoint implements audit.CheckpointVerifier.
func (c CheckpointKeys) VerifyCheckpoint(kid string, statement []byte, signature string) error {
	raw, err := base64.RawURLEncoding.DecodeString(signature)
	if err != nil {
		return errors.New("the signature is not base64url without padding")
	}
	k, err := c.Keys.Key(context.Background(), kid)
	if err != nil {
		return err
	}
	switch pub := k.Key.(type) {
	case ed25519.PublicKey:
		if len(raw) == ed25519.SignatureSize && ed25519.Verify(pub, statement, raw) {
			return nil
		}
	case *ecdsa.PublicKey:
		digest := sha256.Sum256(statement)
		if len(raw) == 64 && ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])) {
			return nil
		}
	default:
		return fmt.Errorf("key %s is a %T, not an Ed25519 or P-256 public key", kid, k.Key)
	}
	return fmt.Errorf("%w: kid %q", sig.ErrBadSignature, kid)
}

// Checkpoint signs a checkpoint of the audit chain with the gateway's key
// (audit.Log.Checkpoint): every record up to the last one is then vouched
// for by the gateway, and `custos audit verify` detects a rewrite of them.
// Nothing is written when the chain already ends with a checkpoint.
func (g *Gateway) Checkpoint(ctx context.Context) error {
	_, _, err := g.o.Audit.Checkpoint(ctx, CheckpointSigner{Signer: g.o.Signer, KID: g.o.KID})
	return err
}
