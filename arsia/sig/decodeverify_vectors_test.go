package sig

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

// vectorsFile is the upstream ARSIA test vectors, when the shared
// conformance material is checked out next to the repository.
const vectorsFile = "../../../shared/conformance/arsia/shared/test-vectors/arsia-test-vectors.json"

// TestDecodeAndVerifyVectors runs every upstream test vector's message
// through DecodeAndVerify and through DecodeEnvelope then Verify, written
// canonically (the copying route) and by encoding/json (which escapes <, >
// and &, so the signing input is written again), and checks the signing
// input against the vector's canonical_bytes_hex where it has one.
func TestDecodeAndVerifyVectors(t *testing.T) {
	data, err := os.ReadFile(vectorsFile)
	if os.IsNotExist(err) {
		t.Skip("shared conformance material not checked out")
	}
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			ID      string         `json:"id"`
			Crypto  map[string]any `json:"crypto"`
			Message json.RawMessage
		} `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	verified, kat := 0, 0
	for _, v := range file.Vectors {
		if len(v.Message) == 0 {
			continue
		}
		msg, err := jcs.Decode(v.Message)
		if err != nil {
			continue // vectors of malformed JSON have their own tests
		}
		env, _ := msg.(map[string]any)
		sec, _ := env["security"].(map[string]any)
		kid, _ := sec["kid"].(string)
		pubHex, _ := v.Crypto["public_key_hex"].(string)
		pub, err := hex.DecodeString(pubHex)
		if err != nil || len(pub) != ed25519.PublicKeySize || kid == "" {
			continue
		}
		keys := NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ed25519.PublicKey(pub), KeyID: kid, Use: "sig"}}})
		opts := VerifyOptions{Algorithms: []string{EdDSA}, Now: func() time.Time { return time.Unix(0, 0) }}
		canonical, err := jcs.CanonicalizeValue(msg)
		if err != nil {
			t.Fatalf("%s: %v", v.ID, err)
		}
		marshalled, err := json.Marshal(msg)
		if err != nil {
			t.Fatalf("%s: %v", v.ID, err)
		}
		for _, wire := range [][]byte{canonical, marshalled, v.Message} {
			if checkSameVerdict(t, wire, keys, opts) != nil {
				verified++
			}
		}
		if want, ok := v.Crypto["canonical_bytes_hex"].(string); ok {
			_, input, err := sharedDecodeOptions.DecodeCanonical(nil, canonical, "security")
			if err != nil {
				t.Fatalf("%s: %v", v.ID, err)
			}
			if hex.EncodeToString(input) != want {
				t.Fatalf("%s: signing input %s, vector canonical_bytes %s", v.ID, input, want)
			}
			if slow, err := SigningInput(env); err != nil || !bytes.Equal(slow, input) {
				t.Fatalf("%s: SigningInput %s, %v; DecodeCanonical %s", v.ID, slow, err, input)
			}
			kat++
		}
	}
	if verified == 0 || kat == 0 {
		t.Fatalf("%d verified, %d known-answer signing inputs: the vectors were not exercised", verified, kat)
	}
	t.Logf("%d verifications agreed, %d signing inputs matched canonical_bytes_hex", verified, kat)
}
