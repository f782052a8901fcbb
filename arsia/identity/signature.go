package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// RecordPath is where an agent serves its identity record, relative to
// its base URL (ARSIA-Identity §7.2).
const RecordPath = ".well-known/arsia/identity"

// SignatureHeader carries the agent's Ed25519 signature over the SHA-256
// of the identity record body, as served.
const SignatureHeader = "X-ARSIA-Sig"

// ParseSignatureHeader decodes an X-ARSIA-Sig value: a 64-byte Ed25519
// signature in base64url (the ARSIA form, unpadded) or, leniently, padded
// or standard base64. Surrounding spaces are ignored.
func ParseSignatureHeader(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 128 {
		return nil, errors.New("empty or oversized signature")
	}
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		if b, err := enc.Strict().DecodeString(v); err == nil {
			if len(b) != ed25519.SignatureSize {
				return nil, fmt.Errorf("signature of %d bytes, want %d", len(b), ed25519.SignatureSize)
			}
			return b, nil
		}
	}
	return nil, errors.New("signature is not base64")
}
