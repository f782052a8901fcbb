package sig

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"testing"
)

// TestRFC8032 checks the Ed25519 signer and verifier against RFC 8032
// §7.1, tests 1 to 3.
func TestRFC8032(t *testing.T) {
	tests := []struct{ name, secret, public, message, signature string }{
		{
			name:      "TEST 1",
			secret:    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
			public:    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
			message:   "",
			signature: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
		},
		{
			name:      "TEST 2",
			secret:    "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
			public:    "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
			message:   "72",
			signature: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
		},
		{
			name:      "TEST 3",
			secret:    "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
			public:    "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
			message:   "af82",
			signature: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secret, public := unhex(t, tc.secret), unhex(t, tc.public)
			message, want := unhex(t, tc.message), unhex(t, tc.signature)
			s, err := NewEd25519Signer(secret)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Public().(ed25519.PublicKey); !bytes.Equal(got, public) {
				t.Fatalf("public key %x, want %x", got, public)
			}
			got, err := s.SignMessage(message)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("signature %x, want %x", got, want)
			}
			if !verifyRaw(EdDSA, ed25519.PublicKey(public), message, want) {
				t.Fatal("known-answer signature does not verify")
			}
			// Must fail as well as pass: any flipped bit breaks it.
			for _, i := range []int{0, 31, 32, 63} {
				bad := bytes.Clone(want)
				bad[i] ^= 0x01
				if verifyRaw(EdDSA, ed25519.PublicKey(public), message, bad) {
					t.Fatalf("signature with byte %d flipped verifies", i)
				}
			}
			if verifyRaw(EdDSA, ed25519.PublicKey(public), append(bytes.Clone(message), 0), want) {
				t.Fatal("signature verifies a longer message")
			}
		})
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
