package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
)

// encKeys are the encryption keys of a rig with encryption: the gateway's
// (private, Options.Decryption) and the sender's (private: the test is the
// sender, and decrypts the replies).
type encKeys struct {
	gateway, sender *jose.JSONWebKey
}

func newEncKey(t testing.TB, kid string) *jose.JSONWebKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jose.JSONWebKey{Key: k, KeyID: kid, Use: "enc", Algorithm: sig.ECDHES}
}

// withEncryption gives the gateway an encryption key and, when
// senderPublishes, the sender a "use": "enc" key in its JWKS.
func withEncryption(keys *encKeys, senderPublishes bool) rigOption {
	return func(o *Options, r *pipeRig) {
		o.Decryption = keys.gateway
		if senderPublishes {
			pub := keys.sender.Public()
			o.Keys = sig.KeySources{o.Keys, sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})}
		}
	}
}

func newEncRig(t *testing.T, senderPublishes bool, opts ...rigOption) (*pipeRig, *encKeys) {
	t.Helper()
	keys := &encKeys{gateway: newEncKey(t, pipeGateway+"#enc-1"), sender: newEncKey(t, pipeSender+"#enc-1")}
	return newPipeRig(t, append([]rigOption{withEncryption(keys, senderPublishes)}, opts...)...), keys
}

// sealing changes how a test request is encrypted, before it is signed.
type sealing func(t testing.TB, env map[string]any)

// buildEncrypted builds the request q as an independent sender would:
// the payload encrypted to recipient (ECDH-ES, A256GCM), then signed;
// tamper, when set, runs between the two.
func (r *pipeRig) buildEncrypted(t testing.TB, q req, recipient *jose.JSONWebKey, alg string, tamper sealing) ([]byte, string) {
	t.Helper()
	body, id := r.build(t, q)
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	delete(env, "security")
	pub := recipient.Public()
	enc, err := sig.EncryptPayload(env, &pub, alg)
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(t, enc)
	}
	signed, err := sig.Sign(enc, r.signer, r.kid)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(signed)
	if err != nil {
		t.Fatal(err)
	}
	return out, id
}

// openReply verifies a reply of the gateway and decrypts its payload the
// way an independent client does: the signature over the JWE first, then
// the JWE with go-jose alone, with the sender's key; it returns the
// envelope with the decrypted payload.
func (r *pipeRig) openReply(t *testing.T, raw []byte, key *jose.JSONWebKey) map[string]any {
	t.Helper()
	m := r.verified(t, raw)
	if get(m, "security", "encrypted") != true || get(m, "security", "enc_alg") != sig.ECDHES || get(m, "security", "enc_method") != sig.A256GCM {
		t.Fatalf("the reply is not encrypted: %s", raw)
	}
	jwe, ok := m["payload"].(string)
	if !ok {
		t.Fatalf("encrypted reply without a JWE payload: %s", raw)
	}
	obj, err := jose.ParseEncryptedCompact(jwe, []jose.KeyAlgorithm{jose.ECDH_ES}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Header.KeyID != key.KeyID {
		t.Errorf("the reply's JWE names kid %q, want the sender's %q", obj.Header.KeyID, key.KeyID)
	}
	plain, err := obj.Decrypt(key.Key)
	if err != nil {
		t.Fatalf("decrypting the reply: %v", err)
	}
	var payload map[string]any
	if err := json.Unmarshal(plain, &payload); err != nil {
		t.Fatalf("reply plaintext %s: %v", plain, err)
	}
	m["payload"] = payload
	return m
}

func TestEncryptedRoundTrip(t *testing.T) {
	r, keys := newEncRig(t, true)
	body, id := r.buildEncrypted(t, req{args: map[string]any{"text": "secret"}}, keys.gateway, sig.ECDHES, nil)
	if strings.Contains(string(body), "secret") {
		t.Fatalf("the request carries its arguments in clear: %s", body)
	}
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 200 {
		t.Fatalf("status %d: %s %v", rep.Status, rep.Envelope, rep.Problem)
	}
	if strings.Contains(string(rep.Envelope), "secret") {
		t.Fatalf("the reply carries the result in clear: %s", rep.Envelope)
	}
	m := r.openReply(t, rep.Envelope, keys.sender)
	if m["intent"] != "response" || m["correlation_id"] != id {
		t.Errorf("reply: %v", m)
	}
	if got := get(m, "payload", "result", "echo", "text"); got != "secret" {
		t.Errorf("decrypted result echo.text = %v, want secret", got)
	}
	// The handler ran the decrypted call, once.
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
	if string(r.echo.calls[0].Args) != `{"text":"secret"}` {
		t.Errorf("handler args %s", r.echo.calls[0].Args)
	}
	// Audited: the hash of the JWE as received (verifiable without the
	// key) and of the plaintext.
	recs := r.recordsOf(t, audit.KindReceived, id)
	if len(recs) != 1 || recs[0].Outcome != audit.OutcomeAccepted {
		t.Fatalf("received records: %+v", recs)
	}
	var env map[string]any
	_ = json.Unmarshal(body, &env)
	sum := sha256.Sum256([]byte(env["payload"].(string)))
	if recs[0].PayloadHash != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("payload_hash %s is not the JWE's", recs[0].PayloadHash)
	}
	if recs[0].Details["encrypted"] != true || !strings.HasPrefix(stringOf(recs[0].Details["plaintext_hash"]), "sha256:") {
		t.Errorf("received record details: %v", recs[0].Details)
	}
	// A plain request to the same gateway is answered in clear.
	rep, _ = r.send(t, req{}, "")
	if pm := r.verified(t, rep.Envelope); rep.Status != 200 || get(pm, "security", "encrypted") != nil {
		t.Errorf("plain request answered %d: %s", rep.Status, rep.Envelope)
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }

// jweParts splits the JWE payload of env.
func jweParts(t testing.TB, env map[string]any) []string {
	t.Helper()
	parts := strings.Split(env["payload"].(string), ".")
	if len(parts) != 5 {
		t.Fatalf("JWE of %d parts", len(parts))
	}
	return parts
}

// flip changes the first byte that part i of the JWE decodes to.
func flip(i int) sealing {
	return func(t testing.TB, env map[string]any) {
		parts := jweParts(t, env)
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || len(b) == 0 {
			t.Fatal(err)
		}
		b[0] ^= 1
		parts[i] = base64.RawURLEncoding.EncodeToString(b)
		env["payload"] = strings.Join(parts, ".")
	}
}

// rawJWE replaces the payload by a JWE of plaintext to key, with kid.
func rawJWE(key *jose.JSONWebKey, kid string, plaintext string) sealing {
	return func(t testing.TB, env map[string]any) {
		enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: jose.ECDH_ES, Key: key.Public().Key, KeyID: kid}, nil)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := enc.Encrypt([]byte(plaintext))
		if err != nil {
			t.Fatal(err)
		}
		s, err := obj.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		env["payload"] = s
	}
}

func TestEncryptedRefusals(t *testing.T) {
	other := newEncKey(t, pipeGateway+"#enc-1") // the gateway's kid, another key
	for _, tc := range []struct {
		name string
		// recipient is who the payload is encrypted to (the gateway's key
		// when nil); alg the key agreement (ECDH-ES when "").
		recipient       func(k *encKeys) *jose.JSONWebKey
		alg             string
		tamper          func(k *encKeys) sealing
		senderPublishes bool
		noGatewayKey    bool
		reason          string
	}{
		{name: "wrong kid", recipient: func(k *encKeys) *jose.JSONWebKey {
			c := *k.gateway
			c.KeyID = pipeGateway + "#enc-old"
			return &c
		}, senderPublishes: true, reason: "jwe_wrong_key"},
		{name: "no kid", tamper: func(k *encKeys) sealing { return rawJWE(k.gateway, "", `{"type":"com.acme/call","args":{}}`) },
			senderPublishes: true, reason: "jwe_wrong_key"},
		{name: "alg ECDH-ES+A256KW", alg: sig.ECDHESA256KW, senderPublishes: true, reason: "enc_alg_not_allowed"},
		{name: "enc A128GCM", tamper: func(*encKeys) sealing {
			return func(_ testing.TB, env map[string]any) { env["security"].(map[string]any)["enc_method"] = "A128GCM" }
		}, senderPublishes: true, reason: "enc_method_not_allowed"},
		{name: "ciphertext tampered", tamper: func(*encKeys) sealing { return flip(3) }, senderPublishes: true, reason: "jwe_decryption_failed"},
		{name: "tag tampered", tamper: func(*encKeys) sealing { return flip(4) }, senderPublishes: true, reason: "jwe_decryption_failed"},
		{name: "encrypted to another key", recipient: func(*encKeys) *jose.JSONWebKey { return other },
			senderPublishes: true, reason: "jwe_decryption_failed"},
		{name: "not a JWE", tamper: func(*encKeys) sealing {
			return func(_ testing.TB, env map[string]any) { env["payload"] = "not.a.jwe" }
		}, senderPublishes: true, reason: "jwe_decryption_failed"},
		{name: "plaintext an array", tamper: func(k *encKeys) sealing { return rawJWE(k.gateway, k.gateway.KeyID, `[1,2]`) },
			senderPublishes: true, reason: "jwe_plaintext_not_object"},
		{name: "plaintext not JSON", tamper: func(k *encKeys) sealing { return rawJWE(k.gateway, k.gateway.KeyID, `{"type":`) },
			senderPublishes: true, reason: "jwe_plaintext_not_json"},
		{name: "sender publishes no encryption key", senderPublishes: false, reason: "sender_encryption_key_missing"},
		{name: "gateway has no encryption key", senderPublishes: true, noGatewayKey: true, reason: "encryption_not_supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []rigOption
			if tc.noGatewayKey {
				opts = append(opts, func(o *Options, _ *pipeRig) { o.Decryption = nil })
			}
			r, keys := newEncRig(t, tc.senderPublishes, opts...)
			recipient := keys.gateway
			if tc.recipient != nil {
				recipient = tc.recipient(keys)
			}
			alg := sig.ECDHES
			if tc.alg != "" {
				alg = tc.alg
			}
			var tamper sealing
			if tc.tamper != nil {
				tamper = tc.tamper(keys)
			}
			body, id := r.buildEncrypted(t, req{}, recipient, alg, tamper)
			rep := r.g.Receive(t.Context(), Inbound{Body: body})
			if rep.Status != 401 {
				t.Fatalf("status %d, want 401: %s %v", rep.Status, rep.Envelope, rep.Problem)
			}
			m := r.verified(t, rep.Envelope)
			if get(m, "security", "encrypted") != nil {
				t.Errorf("a refusal of the encryption is itself encrypted: %s", rep.Envelope)
			}
			if get(m, "payload", "error", "code") != arsia.CodeUnauthorized || get(m, "payload", "error", "details", "reason") != tc.reason {
				t.Errorf("error %v, want unauthorized/%s", get(m, "payload", "error"), tc.reason)
			}
			if m["correlation_id"] != id {
				t.Errorf("correlation_id %v, want %s", m["correlation_id"], id)
			}
			if n := r.echo.n.Load(); n != 0 {
				t.Errorf("the handler ran %d times", n)
			}
			r.noExchange(t, id)
			recs := r.recordsOf(t, audit.KindReceived, id)
			if len(recs) != 1 || recs[0].Outcome != audit.OutcomeRejected || recs[0].Details["encrypted"] != true {
				t.Errorf("received records: %+v", recs)
			}
		})
	}
}

// A JWE altered after signing fails the signature: the request is
// nobody's, nothing is decrypted or stored.
func TestEncryptedTamperedAfterSigning(t *testing.T) {
	r, keys := newEncRig(t, true)
	body, id := r.buildEncrypted(t, req{}, keys.gateway, sig.ECDHES, nil)
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	flip(3)(t, env)
	body, _ = json.Marshal(env)
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 401 || rep.Envelope != nil {
		t.Fatalf("status %d, envelope %s: want an unsigned 401", rep.Status, rep.Envelope)
	}
	if recs := r.recordsOf(t, "", id); len(recs) != 0 {
		t.Errorf("records for an unauthenticated request: %+v", recs)
	}
}

// An encrypted request that needs approval: the reviewer sees, and the
// digest binds, the decrypted call; the pending reply, the decision and
// the final reply are all encrypted to the sender.
func TestEncryptedApproval(t *testing.T) {
	r, keys := newEncRig(t, true)
	args := map[string]any{"text": "transfer 100"}
	body, id := r.buildEncrypted(t, req{args: args, compliance: profile("EU-AI-ACT-HIGH-RISK")}, keys.gateway, sig.ECDHES, nil)
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 202 {
		t.Fatalf("status %d: %s %v", rep.Status, rep.Envelope, rep.Problem)
	}
	pm := r.openReply(t, rep.Envelope, keys.sender)
	if pm["intent"] != "pending_approval" || pm["correlation_id"] != id {
		t.Fatalf("pending reply %v", pm)
	}
	// The reviewer approves the decrypted call.
	x, err := r.xs.Get(t.Context(), rep.ExchangeID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.auth.State(t.Context(), x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]any
	if err := json.Unmarshal(st.Request.Event.Request.Action.Arguments(), &shown); err != nil || shown["text"] != "transfer 100" {
		t.Fatalf("the reviewer is shown %s (%v), not the decrypted arguments", st.Request.Event.Request.Action.Arguments(), err)
	}
	if n := r.echo.n.Load(); n != 0 {
		t.Fatalf("ran before approval")
	}
	r.decide(t, rep.ExchangeID, aais.Approve, "ok")
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("ran %d times after approval", n)
	}
	final, err := r.g.Exchange(t.Context(), rep.ExchangeID)
	if err != nil || final.Status != 200 {
		t.Fatalf("final reply %d %v", final.Status, err)
	}
	fm := r.openReply(t, final.Envelope, keys.sender)
	if fm["intent"] != "response" || get(fm, "payload", "result", "echo", "text") != "transfer 100" {
		t.Errorf("final reply %v", fm)
	}
	raw, err := r.g.Decision(t.Context(), rep.ExchangeID)
	if err != nil || raw == nil {
		t.Fatalf("decision %s %v", raw, err)
	}
	dm := r.openReply(t, raw, keys.sender)
	if get(dm, "payload", "result", "decision") != "approved" {
		t.Errorf("decision %v", dm)
	}
}

// A sender that withdraws its encryption key while its encrypted request
// waits for approval: the approved call does not run, and the sender is
// told why in clear.
func TestEncryptedApprovalKeyWithdrawn(t *testing.T) {
	var publish = true
	keys := &encKeys{gateway: newEncKey(t, pipeGateway+"#enc-1"), sender: newEncKey(t, pipeSender+"#enc-1")}
	r := newPipeRig(t, withEncryption(keys, false), func(o *Options, _ *pipeRig) {
		o.EncryptionKeys = encKeySourceFunc(func() (*jose.JSONWebKey, error) {
			if !publish {
				return nil, sig.ErrNoEncryptionKey
			}
			pub := keys.sender.Public()
			return &pub, nil
		})
	})
	body, _ := r.buildEncrypted(t, req{compliance: profile("EU-AI-ACT-HIGH-RISK")}, keys.gateway, sig.ECDHES, nil)
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 202 {
		t.Fatalf("status %d: %s", rep.Status, rep.Envelope)
	}
	publish = false
	r.decide(t, rep.ExchangeID, aais.Approve, "")
	r.clk.Advance(time.Second)
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 0 {
		t.Fatalf("ran %d times without a key to answer with", n)
	}
	final, err := r.g.Exchange(t.Context(), rep.ExchangeID)
	if err != nil {
		t.Fatal(err)
	}
	m := r.verified(t, final.Envelope)
	if final.Status != 401 || get(m, "payload", "error", "details", "reason") != "sender_encryption_key_missing" {
		t.Errorf("final reply %d %s", final.Status, final.Envelope)
	}
}

type encKeySourceFunc func() (*jose.JSONWebKey, error)

func (f encKeySourceFunc) EncryptionKey(_ context.Context, _ string) (*jose.JSONWebKey, error) {
	return f()
}

func TestDecryptionKeyChecked(t *testing.T) {
	ed := newEncKey(t, pipeGateway+"#enc-1")
	for name, k := range map[string]*jose.JSONWebKey{
		"public only":  func() *jose.JSONWebKey { p := ed.Public(); return &p }(),
		"use sig":      {Key: ed.Key, KeyID: ed.KeyID, Use: "sig"},
		"another kid":  {Key: ed.Key, KeyID: "agent:other#enc-1", Use: "enc"},
		"label absent": {Key: ed.Key, KeyID: pipeGateway + "#", Use: "enc"},
	} {
		t.Run(name, func(t *testing.T) {
			o := Options{Agent: pipeGateway, Decryption: k}
			if err := checkDecryptionKey(o.Decryption, o.Agent); err == nil {
				t.Errorf("accepted %s", name)
			}
		})
	}
	if err := checkDecryptionKey(ed, pipeGateway); err != nil {
		t.Errorf("refused a good key: %v", err)
	}
}

// A reload that trusts a sender's new JWKS (SetPolicy) finds its
// encryption key there: the refusal before is precise, the request after
// runs and is answered encrypted.
func TestEncryptedAfterReload(t *testing.T) {
	r, keys := newEncRig(t, false)
	body, _ := r.buildEncrypted(t, req{}, keys.gateway, sig.ECDHES, nil)
	if rep := r.g.Receive(t.Context(), Inbound{Body: body}); rep.Status != 401 {
		t.Fatalf("before the reload: %d %s", rep.Status, rep.Envelope)
	}
	p := *r.g.policy()
	pub := keys.sender.Public()
	p.Keys = sig.KeySources{p.Keys, sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})}
	if err := r.g.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	body, _ = r.buildEncrypted(t, req{}, keys.gateway, sig.ECDHES, nil)
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 200 {
		t.Fatalf("after the reload: %d %s", rep.Status, rep.Envelope)
	}
	r.openReply(t, rep.Envelope, keys.sender)
}
