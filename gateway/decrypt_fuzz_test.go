package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
)

// FuzzReceiveEncrypted drives the decrypt step with signed requests whose
// payload is a JWE: mode 0 encrypts the fuzzed plaintext to the gateway's
// key, mode 1 sends the fuzzed JWE string as it is, mode 2 encrypts the
// plaintext and then changes byte at of the JWE, and mode 3 declares other
// algorithms (encAlg, encMethod). Invariants: a signed reply addressed to
// the sender; a refusal is 401 unauthorized with a details.reason (or a
// later 4xx of a decrypted request) and writes no exchange; a reply after
// decryption (not unauthorized) is encrypted to the sender's key, and
// decrypts with it to a JSON object.
func FuzzReceiveEncrypted(f *testing.F) {
	for _, s := range []struct {
		plaintext, jwe, encAlg, encMethod string
		mode                              uint8
		at                                uint16
	}{
		{`{"type":"com.acme/call","args":{"text":"hello"}}`, "", "", "", 0, 0},
		{`{"type":"com.acme/call","args":{}}`, "", "", "", 2, 40},
		{`{"type":"com.acme/call","args":{}}`, "", "", "", 2, 300},
		{`[1,2]`, "", "", "", 0, 0},
		{`"text"`, "", "", "", 0, 0},
		{`{"type":`, "", "", "", 0, 0},
		{``, "eyJhbGciOiJFQ0RILUVTIiwiZW5jIjoiQTI1NkdDTSJ9....", "", "", 1, 0},
		{``, "a.b.c.d.e", "", "", 1, 0},
		{`{"type":"com.acme/call","args":{}}`, "", "ECDH-ES+A256KW", "A256GCM", 3, 0},
		{`{"type":"com.acme/call","args":{}}`, "", "ECDH-ES", "A128GCM", 3, 0},
		{`{"type":"com.acme/call","args":{},"result":{}}`, "", "", "", 0, 0},
	} {
		f.Add([]byte(s.plaintext), s.jwe, s.encAlg, s.encMethod, s.mode, s.at)
	}
	r := newFuzzRig(f)
	gwPub := r.gwEnc.Public()
	f.Fuzz(func(t *testing.T, plaintext []byte, jwe, encAlg, encMethod string, mode uint8, at uint16) {
		env := fuzzEnvelope("GDPR-STANDARD", "demo.echo", []byte(`{}`), 0, 300, "", nil)
		switch mode % 4 {
		case 1:
			env["payload"] = jwe
		default:
			enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: jose.ECDH_ES, Key: gwPub.Key, KeyID: gwPub.KeyID}, nil)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := enc.Encrypt(plaintext)
			if err != nil {
				t.Fatal(err)
			}
			s, err := obj.CompactSerialize()
			if err != nil {
				t.Fatal(err)
			}
			if mode%4 == 2 && len(s) > 0 {
				b := []byte(s)
				b[int(at)%len(b)] ^= 1
				s = string(b)
			}
			env["payload"] = s
		}
		sec := map[string]any{"encrypted": true, "enc_alg": sig.ECDHES, "enc_method": sig.A256GCM}
		if mode%4 == 3 {
			sec["enc_alg"], sec["enc_method"] = encAlg, encMethod
		}
		env["security"] = sec
		signed, err := sig.Sign(env, r.signer, r.kid)
		if err != nil {
			return
		}
		body, err := json.Marshal(signed)
		if err != nil {
			return
		}
		writes := r.xs.n.Load()
		rep := r.g.Receive(context.Background(), Inbound{Body: body, Method: "POST", URL: "https://gateway.example/v1/arsia/inbox"})
		if len(rep.Envelope) == 0 {
			// The security member is the sender's to get wrong (empty
			// enc_alg): such a request fails the signature check.
			if rep.Status != 401 {
				t.Fatalf("status %d without an envelope\n%s", rep.Status, body)
			}
			return
		}
		var reply map[string]any
		if err := json.Unmarshal(rep.Envelope, &reply); err != nil {
			t.Fatal(err)
		}
		if _, err := sig.Verify(context.Background(), reply, r.gwKeys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}}); err != nil {
			t.Fatalf("reply does not verify: %v\n%s", err, rep.Envelope)
		}
		if reply["to"] != fuzzSender {
			t.Fatalf("reply to %v", reply["to"])
		}
		if rep.Status >= 500 && rep.Status != 501 {
			t.Fatalf("status %d\n%s\n%s", rep.Status, body, rep.Envelope)
		}
		if p, plain := reply["payload"].(map[string]any); plain {
			e, _ := p["error"].(map[string]any)
			details, _ := e["details"].(map[string]any)
			reason, _ := details["reason"].(string)
			if rep.Status != 401 || e["code"] != "unauthorized" || reason == "" {
				t.Fatalf("a reply in clear to an encrypted request that is not a decryption refusal: %d\n%s", rep.Status, rep.Envelope)
			}
			if w := r.xs.n.Load(); w != writes {
				t.Fatalf("refused, but %d exchange writes", w-writes)
			}
			return
		}
		// Decrypted: the reply is encrypted to the sender.
		v, err := sig.VerifyAndDecrypt(context.Background(), reply, r.gwKeys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}},
			sig.DecryptOptions{Key: r.senderEnc, Algorithms: []string{sig.ECDHES}, RequireKeyID: true})
		if err != nil {
			t.Fatalf("the encrypted reply does not decrypt with the sender's key: %v\n%s", err, rep.Envelope)
		}
		if rep.Status >= 400 && r.xs.n.Load() != writes {
			t.Fatalf("refused with %d after decryption, but the exchange store was written: %v", rep.Status, v.Payload)
		}
	})
}
