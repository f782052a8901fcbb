package arsia_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/jcs"
)

// benchEnvelope builds a signed request of about size bytes on the wire,
// under the EU-AI-ACT-HIGH-RISK profile, and the key set that verifies it.
func benchEnvelope(b *testing.B, size int) (wire []byte, keys sig.KeySource, pub ed25519.PublicKey) {
	b.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub = priv.Public().(ed25519.PublicKey)
	const from = "agent:acme.advisor"
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

	args := map[string]any{"customer": "c-1042", "amount": "100.00", "currency": "EUR"}
	var lines []any
	for i := 0; ; i++ {
		args["lines"] = lines
		probe, _ := jcs.CanonicalizeValue(args)
		if len(probe) >= size-700 { // the rest of the envelope is ~700 bytes
			break
		}
		lines = append(lines, map[string]any{"sku": fmt.Sprintf("SKU-%05d", i), "qty": i%7 + 1, "price": "12.50", "note": "café crème"})
	}
	e, err := arsia.NewRequest(from, "agent:acme.billing", []string{"billing.invoice.create"},
		"com.acme.billing/create-invoice", args, arsia.BuildOptions{
			Now:        now,
			ID:         "0b4f4a5e-8d2a-4c1e-9a8f-3c2d1e0f9a8b",
			Compliance: map[string]any{"profile": "EU-AI-ACT-HIGH-RISK", "legal_basis": "contract"},
			Context:    &arsia.Context{TraceID: strings.Repeat("ab", 16), SpanID: strings.Repeat("cd", 8)},
		})
	if err != nil {
		b.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		b.Fatal(err)
	}
	signer, err := sig.NewEd25519Signer(seed)
	if err != nil {
		b.Fatal(err)
	}
	signed, err := sig.Sign(env, signer, from+"#key-1")
	if err != nil {
		b.Fatal(err)
	}
	wire, err = jcs.CanonicalizeValue(signed)
	if err != nil {
		b.Fatal(err)
	}
	keys = sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: from + "#key-1", Algorithm: "EdDSA", Use: "sig"}}})
	return wire, keys, pub
}

var verifyOpts = sig.VerifyOptions{Algorithms: []string{"EdDSA"}}

// receive is the receiver's path from wire bytes to an accepted envelope:
// strict decode, signature, L1, L2 and compliance.
func receive(ctx context.Context, wire []byte, keys sig.KeySource) error {
	v, err := sig.DecodeAndVerify(ctx, wire, keys, verifyOpts)
	if err != nil {
		return err
	}
	if issues := arsia.ErrorIssues(arsia.Validate(v.Envelope, arsia.ValidateOptions{})); len(issues) > 0 {
		return fmt.Errorf("invalid: %v", issues)
	}
	return nil
}

// receiveInSteps is receive through the separate steps: DecodeEnvelope,
// then Verify (which canonicalizes and copies the decoded envelope).
func receiveInSteps(ctx context.Context, wire []byte, keys sig.KeySource) error {
	env, err := sig.DecodeEnvelope(wire)
	if err != nil {
		return err
	}
	if _, err := sig.Verify(ctx, env, keys, verifyOpts); err != nil {
		return err
	}
	if issues := arsia.ErrorIssues(arsia.Validate(env, arsia.ValidateOptions{})); len(issues) > 0 {
		return fmt.Errorf("invalid: %v", issues)
	}
	return nil
}

var treeSink any

// treePlan is a decoded tree flattened for rebuilding it: what a decoder
// has learned from the bytes, with the parsing and the checks already done.
type treePlan struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'v' other
	keys []string
	kids []*treePlan
	str  string
	val  any
}

func planOf(v any) *treePlan {
	switch v := v.(type) {
	case map[string]any:
		p := &treePlan{kind: 'o'}
		for k, e := range v {
			p.keys = append(p.keys, k)
			p.kids = append(p.kids, planOf(e))
		}
		return p
	case []any:
		p := &treePlan{kind: 'a'}
		for _, e := range v {
			p.kids = append(p.kids, planOf(e))
		}
		return p
	case string:
		return &treePlan{kind: 's', str: v}
	case json.Number:
		return &treePlan{kind: 'n', str: string(v)}
	}
	return &treePlan{kind: 'v', val: v}
}

// build makes the tree p describes as a decoder does: maps and slices at
// their exact sizes and a new interface value for every string and number
// (their bytes shared).
func (p *treePlan) build() any {
	switch p.kind {
	case 'o':
		m := make(map[string]any, len(p.keys))
		for i, k := range p.keys {
			m[k] = p.kids[i].build()
		}
		return m
	case 'a':
		a := make([]any, len(p.kids))
		for i, k := range p.kids {
			a[i] = k.build()
		}
		return a
	case 's':
		return p.str
	case 'n':
		return json.Number(p.str)
	}
	return p.val
}

// pairedRatio runs bare and other alternately, one of each per iteration,
// and reports the median bare time over the median other time.
func pairedRatio(b *testing.B, bare, other func(), name string) {
	var tb, to []time.Duration
	for b.Loop() {
		t0 := time.Now()
		bare()
		t1 := time.Now()
		other()
		t2 := time.Now()
		tb = append(tb, t1.Sub(t0))
		to = append(to, t2.Sub(t1))
	}
	mb, mo := median(tb), median(to)
	b.ReportMetric(float64(mb)/float64(mo), "bare/"+name)
	b.ReportMetric(float64(mb)/1e3, "µs-bare")
	b.ReportMetric(float64(mo)/1e3, "µs-"+name)
}

// median returns the median of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func BenchmarkReceive(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{1 << 10, 64 << 10} {
		wire, keys, pub := benchEnvelope(b, size)
		env, err := sig.DecodeEnvelope(wire)
		if err != nil {
			b.Fatal(err)
		}
		if err := receive(ctx, wire, keys); err != nil {
			b.Fatal(err)
		}
		if err := receiveInSteps(ctx, wire, keys); err != nil {
			b.Fatal(err)
		}
		// The bytes ed25519 actually verifies: the canonical envelope
		// without security.
		signingInput, err := sig.SigningInput(env)
		if err != nil {
			b.Fatal(err)
		}
		rawSig, err := base64.RawURLEncoding.DecodeString(env["security"].(map[string]any)["sig"].(string))
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("%dKB", size>>10)
		b.Run(name+"/ed25519.Verify", func(b *testing.B) {
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				if !ed25519.Verify(pub, signingInput, rawSig) {
					b.Fatal("bare verify failed")
				}
			}
		})
		b.Run(name+"/sign", func(b *testing.B) {
			signer, _ := sig.NewEd25519Signer(make([]byte, 32))
			unsigned := env
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				if _, err := sig.Sign(unsigned, signer, "agent:acme.advisor#key-1"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/verify", func(b *testing.B) {
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				env, err := sig.DecodeEnvelope(wire)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sig.Verify(ctx, env, keys, verifyOpts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/receive", func(b *testing.B) {
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				if err := receive(ctx, wire, keys); err != nil {
					b.Fatal(err)
				}
			}
		})
		bare := func(b *testing.B) func() {
			return func() {
				if !ed25519.Verify(pub, signingInput, rawSig) {
					b.Fatal("bare verify failed")
				}
			}
		}
		// The stages of receive apart, each paired with bare, for the
		// arithmetic of where its time goes: DecodeAndVerify (decode,
		// signing input, key checks and Ed25519: less bare, the decode)
		// and L1+L2+compliance.
		b.Run(name+"/stage-decode-verify", func(b *testing.B) {
			pairedRatio(b, bare(b), func() {
				if _, err := sig.DecodeAndVerify(ctx, wire, keys, verifyOpts); err != nil {
					b.Fatal(err)
				}
			}, "decode-verify")
		})
		b.Run(name+"/stage-validate", func(b *testing.B) {
			pairedRatio(b, bare(b), func() {
				if issues := arsia.ErrorIssues(arsia.Validate(env, arsia.ValidateOptions{})); len(issues) > 0 {
					b.Fatal(issues)
				}
			}, "validate")
		})
		// ratio runs bare and receive alternately, one of each per
		// iteration, and reports the median bare time over the median
		// receive time: both see the same load on a shared machine, which
		// separate sub-benchmarks seconds apart do not, and the medians
		// ignore the iterations a busy neighbour preempted.
		b.Run(name+"/ratio", func(b *testing.B) {
			pairedRatio(b, bare(b), func() {
				if err := receive(ctx, wire, keys); err != nil {
					b.Fatal(err)
				}
			}, "receive")
		})
		// The same pairing for the tree floor: building the decoded
		// envelope's maps, slices and interface values from a flattened
		// plan of it, with no parsing and no checks, about the least any
		// decoder whose result is the generic map[string]any tree can
		// spend. receive builds that tree, so bare/tree-floor bounds
		// bare/receive: 1/(1 + tree-floor/bare) at best.
		plan := planOf(env)
		b.Run(name+"/floor-ratio", func(b *testing.B) {
			pairedRatio(b, bare(b), func() { treeSink = plan.build() }, "tree-floor")
		})
		b.Run(name+"/receive-in-steps", func(b *testing.B) {
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				if err := receiveInSteps(ctx, wire, keys); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
