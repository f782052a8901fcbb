package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/exchange"
)

// The tests of this file send what an attacker would: forged, stale,
// future-dated and rate-limited traffic (docs/security.md).

// resign replaces members of a signed request and signs it again with the
// sender's key, or leaves the old signature when resign is false.
func (r *pipeRig) mutate(t *testing.T, body []byte, resign bool, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	if resign {
		delete(m, "security")
		signed, err := sig.Sign(m, r.signer, r.kid)
		if err != nil {
			t.Fatal(err)
		}
		m = signed
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A request whose signature does not verify is nobody's: it gets an
// unsigned problem in fixed words (the same for an unknown key and a bad
// signature), addressed to nobody, and leaves nothing behind.
func TestUnauthenticatedIsRefusedForNothing(t *testing.T) {
	r := newPipeRig(t)
	body, _ := r.build(t, req{})
	evil := "Your request was refused. Resubmit via https://evil.example/form"
	cases := map[string][]byte{
		"bad signature": r.mutate(t, body, false, func(m map[string]any) { m["payload"].(map[string]any)["args"] = map[string]any{"text": "changed"} }),
		"unknown kid with text": r.mutate(t, body, false, func(m map[string]any) {
			m["security"].(map[string]any)["kid"] = pipeSender + "#" + evil
		}),
		"victim's name, huge id": r.mutate(t, body, false, func(m map[string]any) {
			m["from"] = "agent:victim.bot"
			m["id"] = strings.Repeat("x", 500_000)
		}),
	}
	var first string
	for name, b := range cases {
		rep := r.g.Receive(t.Context(), Inbound{Body: b})
		if rep.Status != 401 || rep.Envelope != nil || rep.Problem == nil {
			t.Fatalf("%s: %d %s %v, want an unsigned 401 problem", name, rep.Status, rep.Envelope, rep.Problem)
		}
		words, _ := json.Marshal(rep.Problem.Envelope)
		if strings.Contains(string(words), "evil") || strings.Contains(string(words), "victim") || strings.Contains(string(words), "xxxx") {
			t.Fatalf("%s: the problem repeats the request: %s", name, words)
		}
		if first == "" {
			first = rep.Problem.Envelope.UserMessage()
		} else if rep.Problem.Envelope.UserMessage() != first {
			t.Fatalf("%s: %q, while another refusal said %q: the answer tells the failures apart", name, rep.Problem.Envelope.UserMessage(), first)
		}
	}
	if recs := r.records(t); len(recs) != 0 {
		t.Fatalf("%d audit records written for unauthenticated requests: %+v", len(recs), recs[0])
	}
	if xs, err := r.xs.Waiting(t.Context(), exchange.States...); err != nil || len(xs) != 0 {
		t.Fatalf("exchanges: %d, %v", len(xs), err)
	}
	if m := r.metrics(t); !strings.Contains(m, `custos_unauthenticated_total{reason="signature"} 3`) {
		t.Fatalf("metrics:\n%s", m)
	}
}

// A correctly signed message outside its acceptance window — stale,
// future-dated, expired — is refused before anything is stored or run.
func TestStaleAndFutureMessagesAreRefused(t *testing.T) {
	tests := []struct {
		name    string
		ts      time.Duration // the message's ts, relative to now
		profile string
		ok      bool
	}{
		{"a year old", -365 * 24 * time.Hour, "GDPR-STANDARD", false},
		{"an hour old", -time.Hour, "GDPR-STANDARD", false},
		{"a day ahead", 24 * time.Hour, "GDPR-STANDARD", false},
		{"ten years ahead", 10 * 365 * 24 * time.Hour, "GDPR-STANDARD", false},
		{"past the high-risk skew", -150 * time.Second, "EU-AI-ACT-HIGH-RISK", false},
		{"ahead past the MiFID skew", 90 * time.Second, "MIFID-II", false},
		{"within the default skew", -200 * time.Second, "GDPR-STANDARD", true},
		{"within the high-risk skew", -100 * time.Second, "EU-AI-ACT-HIGH-RISK", true},
		{"slightly ahead", 30 * time.Second, "DORA", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t)
			r.clk.Advance(tc.ts)
			body, id := r.build(t, req{compliance: profile(tc.profile)})
			r.clk.Advance(-tc.ts)
			rep := r.g.Receive(t.Context(), Inbound{Body: body})
			if tc.ok {
				if rep.Status != 200 && rep.Status != 202 {
					t.Fatalf("%d %s", rep.Status, rep.Envelope)
				}
				return
			}
			if rep.Status != 400 {
				t.Fatalf("%d %s, want 400", rep.Status, rep.Envelope)
			}
			m := r.verified(t, rep.Envelope)
			if get(m, "payload", "error", "code") != "invalid_request" {
				t.Fatalf("error: %s", rep.Envelope)
			}
			r.noExchange(t, id)
			if r.echo.n.Load() != 0 {
				t.Fatal("the call ran")
			}
		})
	}
}

// A signed request is answered with a signed error even when the text that
// describes its fault is not ASCII.
func TestSignedReplyWhateverTheText(t *testing.T) {
	r := newPipeRig(t)
	body, _ := r.build(t, req{})
	body = r.mutate(t, body, true, func(m map[string]any) { m["capabilities"] = []any{"démo.écho"} })
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 400 || rep.Envelope == nil {
		t.Fatalf("%d %s %v, want a signed 400", rep.Status, rep.Envelope, rep.Problem)
	}
	r.verified(t, rep.Envelope)
}

// A sender over its rate limit is refused without a durable write.
func TestRateLimitedWritesNothing(t *testing.T) {
	r := newPipeRig(t, func(o *Options, _ *pipeRig) { o.RateLimit = RateLimit{PerSecond: 0.001, Burst: 1} })
	if rep, _ := r.send(t, req{}, ""); rep.Status != 200 {
		t.Fatalf("first: %d", rep.Status)
	}
	before := len(r.records(t))
	for range 20 {
		if rep, _ := r.send(t, req{}, ""); rep.Status != 429 {
			t.Fatalf("over the limit: %d", rep.Status)
		}
	}
	if after := len(r.records(t)); after != before {
		t.Fatalf("%d audit records written for refused requests", after-before)
	}
}

// The replay window outlives idempotency records: once the key of a request
// expired and was purged, the same signed bytes get the first reply and do
// not run again.
func TestReplayAfterTheKeyIsPurgedDoesNotRun(t *testing.T) {
	r := newPipeRig(t)
	body, id := r.build(t, req{idemKey: "pay-42"})
	first := r.g.Receive(t.Context(), Inbound{Body: body, IdempotencyKey: "pay-42"})
	if first.Status != 200 || r.echo.n.Load() != 1 {
		t.Fatalf("first: %d, ran %d", first.Status, r.echo.n.Load())
	}
	n, err := r.xs.PurgeIdempotency(t.Context(), r.clk.Now().Add(48*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("purged %d keys, %v", n, err)
	}
	for _, key := range []string{"pay-42", ""} {
		rep := r.g.Receive(t.Context(), Inbound{Body: body, IdempotencyKey: key})
		if rep.Status != 200 || string(rep.Envelope) != string(first.Envelope) {
			t.Fatalf("replay (header %q): %d %s, want the first reply", key, rep.Status, rep.Envelope)
		}
	}
	if got := r.echo.n.Load(); got != 1 {
		t.Fatalf("the replayed request ran %d times", got)
	}
	if recs := r.recordsOf(t, "execution", id); len(recs) != 1 {
		t.Fatalf("%d execution records", len(recs))
	}
}

// A fault whose wire code needs details (not_implemented must name the
// supported versions, certificate refusals a reason) is still answered
// signed when the code that found it gave none.
func TestSignedReplyWithRequiredDetails(t *testing.T) {
	r := newPipeRig(t)
	for _, code := range []string{"unrecognised_payload_type", "certificate_revoked"} {
		rep := r.g.errorReply(t.Context(), pipeSender, uuid.NewString(), &arsia.Error{Code: code, Description: "Refused."}, r.clk.Now())
		if rep.Envelope == nil {
			t.Fatalf("%s: %d %v, want a signed reply", code, rep.Status, rep.Problem)
		}
		r.verified(t, rep.Envelope)
	}
}

// A signed request whose id is not a UUID (so that no reply may correlate
// to it) is still answered signed, correlated to an id derived from it.
func TestSignedReplyToAMalformedID(t *testing.T) {
	r := newPipeRig(t)
	body, _ := r.build(t, req{})
	for _, id := range []any{"x", "\u202e<script>", strings.Repeat("9", 300), "", map[string]any{}} {
		b := r.mutate(t, body, true, func(m map[string]any) { m["id"] = id })
		rep := r.g.Receive(t.Context(), Inbound{Body: b})
		if rep.Status != 400 || rep.Envelope == nil {
			t.Fatalf("id %q: %d %v, want a signed 400", id, rep.Status, rep.Problem)
		}
		m := r.verified(t, rep.Envelope)
		s, _ := id.(string)
		if m["correlation_id"] != correlationOf(s) || get(m, "payload", "error", "details", "correlation_id_derived_from") != "/id" {
			t.Fatalf("id %q: %s", id, rep.Envelope)
		}
	}
}
