package gateway

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/jcs"
	"github.com/custos-runtime/custos/store"
)

const (
	fuzzSender  = "agent:acme.fuzzer"
	fuzzGateway = "agent:acme.gateway"
)

// fuzzNow is the gateway's clock during the fuzz target: fixed, so that an
// input means the same thing in every run.
var fuzzNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// writeCounter is an exchange backend that counts the writes that changed
// something.
type writeCounter struct {
	exchange.Backend
	n atomic.Int64
}

func (w *writeCounter) count(ok bool, err error) {
	if ok && err == nil {
		w.n.Add(1)
	}
}

func (w *writeCounter) Create(ctx context.Context, x exchange.Exchange) (exchange.Exchange, bool, error) {
	s, ok, err := w.Backend.Create(ctx, x)
	w.count(ok, err)
	return s, ok, err
}

func (w *writeCounter) Claim(ctx context.Context, id string, from ...exchange.State) (exchange.Exchange, bool, error) {
	s, ok, err := w.Backend.Claim(ctx, id, from...)
	w.count(ok, err)
	return s, ok, err
}

func (w *writeCounter) Transition(ctx context.Context, id string, from, to exchange.State, reply json.RawMessage, status int) (exchange.Exchange, bool, error) {
	s, ok, err := w.Backend.Transition(ctx, id, from, to, reply, status)
	w.count(ok, err)
	return s, ok, err
}

func (w *writeCounter) Apply(ctx context.Context, id string, from, to exchange.State, c exchange.Change) (exchange.Exchange, bool, error) {
	s, ok, err := w.Backend.Apply(ctx, id, from, to, c)
	w.count(ok, err)
	return s, ok, err
}

func (w *writeCounter) CompleteReview(ctx context.Context, id, reviewer string, v exchange.Verdict, j string) (exchange.Review, bool, error) {
	s, ok, err := w.Backend.CompleteReview(ctx, id, reviewer, v, j)
	w.count(ok, err)
	return s, ok, err
}

func (w *writeCounter) MarkTimedOut(ctx context.Context, id string) (bool, error) {
	ok, err := w.Backend.MarkTimedOut(ctx, id)
	w.count(ok, err)
	return ok, err
}

// fuzzRig is one gateway shared by a worker's iterations, with fixed keys
// (the sender's is trusted, the gateway's verifies replies).
type fuzzRig struct {
	g      *Gateway
	xs     *writeCounter
	st     aais.Store
	signer sig.Signer
	kid    string
	gwKeys sig.KeySource
	// gwEnc and senderEnc are the private encryption keys of the gateway
	// and of the sender.
	gwEnc, senderEnc *jose.JSONWebKey
}

func fixedSigner(tb testing.TB, seed string) (sig.Signer, ed25519.PublicKey) {
	tb.Helper()
	s := sha256.Sum256([]byte(seed))
	signer, err := sig.NewEd25519Signer(s[:])
	if err != nil {
		tb.Fatal(err)
	}
	return signer, ed25519.NewKeyFromSeed(s[:]).Public().(ed25519.PublicKey)
}

func newFuzzRig(tb testing.TB) *fuzzRig {
	tb.Helper()
	r := &fuzzRig{kid: fuzzSender + "#key-1"}
	var pub ed25519.PublicKey
	r.signer, pub = fixedSigner(tb, "fuzz sender")
	senders := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: r.kid, Algorithm: "EdDSA", Use: "sig"}}})
	gwSigner, gwPub := fixedSigner(tb, "fuzz gateway")
	gwKID := fuzzGateway + "#gw-1"
	r.gwKeys = sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: gwPub, KeyID: gwKID, Algorithm: "EdDSA", Use: "sig"}}})
	now := func() time.Time { return fuzzNow }
	// The state custos serve runs on, one file, each step a unit of work.
	// It syncs every write: on tmpfs that costs nothing.
	dir := tb.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "custos-fuzz-"); err == nil {
		dir = d
		tb.Cleanup(func() { _ = os.RemoveAll(d) })
	}
	state, err := store.Open(context.Background(), store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, store.StateFile)},
		&store.StateOptions{Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = state.Close() })
	r.st = state.Approvals
	auth, err := aais.NewAuthority(r.st, &aais.AuthorityOptions{Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	r.xs = &writeCounter{Backend: state.Exchanges}
	// Encryption keys: the gateway's, and the sender's published one
	// (FuzzReceiveEncrypted).
	r.gwEnc, r.senderEnc = newEncKey(tb, fuzzGateway+"#enc-1"), newEncKey(tb, fuzzSender+"#enc-1")
	senderEnc := r.senderEnc.Public()
	r.g, err = New(Options{
		Agent: fuzzGateway, Signer: gwSigner, KID: gwKID, Keys: sig.KeySources{senders, sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{senderEnc}})},
		Decryption: r.gwEnc,
		Grants:     map[string][]string{fuzzSender: {"demo.echo", "demo.other"}},
		Handlers:   map[string]handler.Handler{"demo.echo": handler.NewEcho(), "demo.other": handler.NewEcho(), "demo.ungranted": handler.NewEcho()},
		Authority:  auth, Exchanges: r.xs, Audit: audit.New(state.Audit, nil), Units: state,
		Now: now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func (r *fuzzRig) approvalEvents(tb testing.TB) int {
	tb.Helper()
	p, err := r.st.EventsAfter(context.Background(), 0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return len(p.Events)
}

// fuzzEnvelope builds the request the inputs describe. extra's members
// (an object) replace the envelope's own, except from and security (the
// request must stay one the sender signs) and id (see below).
func fuzzEnvelope(profile, capability string, args []byte, tsOff, expOff int32, idemKey string, extra []byte) map[string]any {
	h := sha256.New()
	for _, s := range []string{profile, capability, string(args), idemKey, string(extra)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	sum := h.Sum([]byte{byte(tsOff), byte(tsOff >> 8), byte(expOff), byte(expOff >> 8)})
	id := hex.EncodeToString(sum[:16])
	id = id[:8] + "-" + id[8:12] + "-4" + id[13:16] + "-8" + id[17:20] + "-" + id[20:32]
	var argv any = string(args)
	if v, err := jcs.Decode(args); err == nil {
		argv = v
	}
	env := map[string]any{
		"v": "1.0", "id": id, "from": fuzzSender, "to": fuzzGateway, "intent": "request",
		"ts":           arsia.FormatTimestamp(fuzzNow.Add(time.Duration(tsOff) * time.Second)),
		"capabilities": []any{capability},
		"payload":      map[string]any{"type": "com.acme/call", "args": argv},
	}
	if expOff != 0 {
		env["expires_at"] = arsia.FormatTimestamp(fuzzNow.Add(time.Duration(expOff) * time.Second))
	}
	if profile != "" {
		env["compliance"] = map[string]any{"profile": profile}
	}
	if idemKey != "" {
		env["idempotency"] = map[string]any{"key": idemKey, "expires_at": arsia.FormatTimestamp(fuzzNow.Add(time.Hour))}
	}
	if v, err := jcs.Decode(extra); err == nil {
		if m, ok := v.(map[string]any); ok {
			for k, v := range m {
				if k != "from" && k != "security" {
					env[k] = v
				}
			}
		}
	}
	return env
}

// FuzzReceive drives the pipeline after the signature check: the target
// signs each request it builds with a key the gateway trusts, so the
// fuzzer reaches validation, freshness, authorization, oversight,
// idempotency and execution. Invariants: a request whose signature
// verifies always gets a reply envelope the gateway signed, addressed to
// the sender; never a 5xx other than 501 not_implemented (no input of a
// trusted sender is the gateway's failure); and a refused request (4xx) writes nothing to the exchange
// store and records no approval (audit records of refusals are allowed).
func FuzzReceive(f *testing.F) {
	type seed struct {
		profile, capability string
		args                string
		tsOff, expOff       int32
		idemKey, header     string
		extra               string
	}
	for _, s := range []seed{
		{"GDPR-STANDARD", "demo.echo", `{"text":"hello"}`, 0, 300, "", "", ``},
		{"EU-AI-ACT-HIGH-RISK", "demo.echo", `{"text":"needs a human"}`, 0, 300, "", "", ``},
		{"DSA-VLOP", "demo.other", `{"n":1}`, 0, 300, "order-1", "", ``},
		{"MIFID-II", "demo.echo", `{}`, -61, 300, "", "", ``},
		{"GDPR-STANDARD", "demo.echo", `{}`, 0, -20, "", "", ``},
		{"GDPR-STANDARD", "demo.echo", `{}`, 86400, 0, "", "", ``},
		{"NO-SUCH-PROFILE", "demo.echo", `{}`, 0, 300, "", "", ``},
		{"", "demo.ungranted", `{}`, 0, 300, "", "", ``},
		{"GDPR-STANDARD", "nope", `[1,2]`, 0, 300, "", "", ``},
		{"GDPR-STANDARD", "demo.echo", `{"a":1}`, 0, 300, "k", "other-key", ``},
		{"GDPR-STANDARD", "demo.echo", `{}`, 0, 300, "", "", `{"intent":"event"}`},
		{"GDPR-STANDARD", "demo.echo", `{}`, 0, 300, "", "", `{"to":"agent:acme.elsewhere","correlation_id":"x"}`},
		{"GDPR-STANDARD", "demo.echo", `{}`, 0, 300, "", "", `{"compliance":{"profile":"GDPR-STANDARD","pii_involved":true,"legal_basis":"consent","data_residency":"EU","human_oversight":"required_post_execution"}}`},
		{"GDPR-STANDARD", "demo.echo", `{}`, 0, 300, "", "", `{"v":"9.9","payload":"eyJ.jwe","security":{}}`},
		{"GDPR-STANDARD", "demo.echo", `{}`, 0, 300, "", "", `{"context":{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","session_id":"s"},"capabilities":["demo.echo","demo.other"]}`},
		{"GDPR-STANDARD", "demo.echo", `{}`, 0, 300, "\u00e9\u0000\n", "", `{"idempotency":{"key":"k","expires_at":"2020-01-01T00:00:00.000Z"}}`},
	} {
		f.Add(s.profile, s.capability, []byte(s.args), s.tsOff, s.expOff, s.idemKey, s.header, []byte(s.extra))
	}
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, profile, capability string, args []byte, tsOff, expOff int32, idemKey, header string, extra []byte) {
		env := fuzzEnvelope(profile, capability, args, tsOff, expOff, idemKey, extra)
		signed, err := sig.Sign(env, r.signer, r.kid)
		if err != nil {
			return // not an envelope the sender can sign
		}
		body, err := json.Marshal(signed)
		if err != nil {
			return
		}
		writes, events := r.xs.n.Load(), r.approvalEvents(t)
		rep := r.g.Receive(context.Background(), Inbound{Body: body, IdempotencyKey: header, Method: "POST", URL: "https://gateway.example/v1/arsia/inbox"})
		// 501 is not a failure: it is not_implemented, the answer ARSIA
		// gives to a version or payload type the receiver does not know.
		if rep.Status < 200 || rep.Status >= 500 && rep.Status != 501 {
			t.Fatalf("status %d for a signed request (problem %v)\n%s\n%s", rep.Status, rep.Problem, body, rep.Envelope)
		}
		if len(rep.Envelope) == 0 {
			t.Fatalf("status %d and no signed envelope for a signed request (problem %v)\n%s", rep.Status, rep.Problem, body)
		}
		var reply map[string]any
		if err := json.Unmarshal(rep.Envelope, &reply); err != nil {
			t.Fatalf("reply is not JSON: %v\n%s", err, rep.Envelope)
		}
		if _, err := sig.Verify(context.Background(), reply, r.gwKeys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}}); err != nil {
			t.Fatalf("the reply does not verify with the gateway's key: %v\n%s\n%s", err, body, rep.Envelope)
		}
		if reply["to"] != fuzzSender || reply["from"] != fuzzGateway {
			t.Fatalf("reply from %v to %v\n%s", reply["from"], reply["to"], rep.Envelope)
		}
		payload, _ := reply["payload"].(map[string]any)
		rerr, _ := payload["error"].(map[string]any)
		if desc, ok := rerr["description"].(string); ok {
			// The gateway signs this text: what it quotes of the request
			// (a validated capability, say) is bounded and escaped
			// (issue 13 §2).
			if len(desc) > 1024 || strings.ContainsFunc(desc, func(r rune) bool {
				return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
			}) {
				t.Fatalf("signed description of %d bytes: %q", len(desc), desc)
			}
		}
		if rep.Status >= 400 {
			if code, _ := rerr["code"].(string); rep.Status == 501 && code != "not_implemented" {
				t.Fatalf("501 with error code %q\n%s", code, rep.Envelope)
			}
			if w := r.xs.n.Load(); w != writes {
				t.Fatalf("refused with %d, but %d exchange writes happened\n%s\n%s", rep.Status, w-writes, body, rep.Envelope)
			}
			if e := r.approvalEvents(t); e != events {
				t.Fatalf("refused with %d, but %d approval events were recorded\n%s\n%s", rep.Status, e-events, body, rep.Envelope)
			}
		}
	})
}
