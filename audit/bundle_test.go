package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/audit"
)

// bundleKeys turns the test JWKS (`{"k":"<name>"}`) into a verifier:
// "good" is key, anything else another key.
func bundleKeys(key edKey) func([]byte) (audit.CheckpointVerifier, error) {
	other := edKey{}
	other.pub, other.priv, _ = ed25519.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{9}, 64)))
	return func(jwks []byte) (audit.CheckpointVerifier, error) {
		switch string(jwks) {
		case `{"k":"good"}`:
			return key, nil
		case `{"k":"other"}`:
			return other, nil
		}
		return nil, errors.New("not a JWKS")
	}
}

func makeBundle(t *testing.T, key edKey) []byte {
	t.Helper()
	ctx := t.Context()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	l := audit.New(audit.NewMemory(), &audit.Options{Now: func() time.Time { return now }, CheckpointEvery: 10 * time.Minute})
	if _, _, err := l.CheckpointEvent(ctx, key, audit.EventStart); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		if _, err := l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: m}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := l.Checkpoint(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: "m4"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.CheckpointEvent(ctx, key, audit.EventStop); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	m, rep, err := l.ExportBundle(ctx, &buf, []byte(`{"k":"good"}`), audit.VerifyOptions{Checkpoints: key})
	if err != nil || m.Records != 7 || m.Checkpoints != 3 || m.LastSeq != 7 || rep.Tail.Status != audit.TailCleanStop {
		t.Fatalf("ExportBundle: %+v %+v %v", m, rep, err)
	}
	return buf.Bytes()
}

// lines splits a bundle: the manifest, then records.
func lines(b []byte) [][]byte { return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) }

func join(ls [][]byte) []byte { return append(bytes.Join(ls, []byte("\n")), '\n') }

// A bundle verifies offline, and every way of changing it after export is
// refused with the problem named.
func TestBundle(t *testing.T) {
	key := newEdKey(t)
	b := makeBundle(t, key)
	keys := bundleKeys(key)
	m, rep, err := audit.VerifyBundle(bytes.NewReader(b), keys, audit.VerifyOptions{})
	if err != nil || !rep.OK() || rep.Records != 7 || rep.Checkpoints != 3 || m.Head != rep.Head || rep.Tail.Status != audit.TailCleanStop {
		t.Fatalf("the bundle as exported: %+v, %+v, %v", m, rep.Problem, err)
	}
	ls := lines(b)
	drop := func(i int) []byte {
		out := append([][]byte(nil), ls[:i]...)
		return join(append(out, ls[i+1:]...))
	}
	for _, tc := range []struct {
		name   string
		bundle []byte
		kind   audit.ProblemKind
		detail string
	}{
		{"a record tampered", bytes.Replace(b, []byte(`"m2"`), []byte(`"mX"`), 1), audit.ProblemAltered, "content does not match"},
		{"the last record dropped", drop(len(ls) - 1), audit.ProblemTruncated, "records were removed from the bundle"},
		{"a record dropped", drop(3), audit.ProblemRemoved, "record 3 is missing"},
		{"a checkpoint dropped", drop(5), audit.ProblemRemoved, "record 5 is missing"},
		{"the JWKS swapped", bytes.Replace(b, []byte(`{"k":"good"}`), []byte(`{"k":"other"}`), 1), audit.ProblemCheckpoint, "does not verify"},
		{"a record added", join(append(append([][]byte(nil), ls...), ls[len(ls)-1])), audit.ProblemInserted, "two records claim seq 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rep, err := audit.VerifyBundle(bytes.NewReader(tc.bundle), keys, audit.VerifyOptions{})
			if err != nil || rep.OK() || rep.Problem.Kind != tc.kind || !strings.Contains(rep.Problem.Detail, tc.detail) {
				t.Fatalf("%+v, %v; want %s with %q", rep.Problem, err, tc.kind, tc.detail)
			}
		})
	}
	// Keys given by the verifier override the bundle's.
	if _, rep, _ := audit.VerifyBundle(bytes.NewReader(b), keys, audit.VerifyOptions{Checkpoints: newEdKey(t)}); rep.OK() {
		t.Fatal("a bundle verified with another key given")
	}
	for _, tc := range []struct{ name, manifest, detail string }{
		{"no manifest", ``, "empty"},
		{"a record first", string(ls[1]), "not a manifest"},
		{"another type", strings.Replace(string(ls[0]), audit.BundleType, "x/v1", 1), "manifest type"},
		{"counts", strings.Replace(string(ls[0]), `"records":7`, `"records":6`, 1), "do not add up"},
		{"no JWKS", strings.Replace(string(ls[0]), `"jwks":{"k":"good"}`, `"jwks":null`, 1), "no JWKS"},
		{"a bad JWKS", strings.Replace(string(ls[0]), `"jwks":{"k":"good"}`, `"jwks":{"k":1}`, 1), "its JWKS"},
		{"a bad time", strings.Replace(string(ls[0]), `"exported_at":"2026`, `"exported_at":"1`, 1), "exported_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := join(append([][]byte{[]byte(tc.manifest)}, ls[1:]...))
			if tc.manifest == "" {
				in = nil
			}
			_, _, err := audit.VerifyBundle(bytes.NewReader(in), keys, audit.VerifyOptions{})
			if !errors.Is(err, audit.ErrBundle) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("%v; want ErrBundle with %q", err, tc.detail)
			}
		})
	}
}

// A chain that does not verify is not exported.
func TestBundleRefusesBrokenChain(t *testing.T) {
	key := newEdKey(t)
	l := audit.New(audit.NewMemory(), nil)
	if _, err := l.Append(t.Context(), audit.Record{Kind: audit.KindReceived, MessageID: "m1"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, _, err := l.ExportBundle(t.Context(), &buf, []byte(`{}`), audit.VerifyOptions{}); err == nil {
		t.Fatal("a bundle without keys")
	}
	_, _, err := l.ExportBundle(t.Context(), &buf, []byte(`{}`), audit.VerifyOptions{Checkpoints: key,
		Anchors: []audit.Anchor{{Seq: 5, Hash: audit.Genesis}}})
	if err == nil || !strings.Contains(err.Error(), "does not verify") || buf.Len() != 0 {
		t.Fatalf("a broken chain exported: %v, %d bytes", err, buf.Len())
	}
}

// FuzzVerifyBundle: any input is answered (an error or a report) without a
// panic, the same way twice; an accepted bundle matches its manifest.
func FuzzVerifyBundle(f *testing.F) {
	key := edKey{}
	key.pub, key.priv, _ = ed25519.GenerateKey(bytes.NewReader(make([]byte, 64)))
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	l := audit.New(audit.NewMemory(), &audit.Options{Now: func() time.Time { return now }, CheckpointEvery: time.Minute})
	_, _, _ = l.CheckpointEvent(ctx, key, audit.EventStart)
	_, _ = l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: "m1"})
	_, _, _ = l.CheckpointEvent(ctx, key, audit.EventStop)
	var seed bytes.Buffer
	if _, _, err := l.ExportBundle(ctx, &seed, []byte(`{"k":"good"}`), audit.VerifyOptions{Checkpoints: key}); err != nil {
		f.Fatal(err)
	}
	f.Add(seed.Bytes())
	f.Add(bytes.Replace(seed.Bytes(), []byte(`"records":3`), []byte(`"records":2`), 1))
	f.Add([]byte(`{"type":"custos.audit.bundle/v1"}` + "\n"))
	keys := bundleKeys(key)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, rep, err := audit.VerifyBundle(bytes.NewReader(data), keys, audit.VerifyOptions{})
		_, again, err2 := audit.VerifyBundle(bytes.NewReader(data), keys, audit.VerifyOptions{})
		if (err == nil) != (err2 == nil) || rep.OK() != again.OK() {
			t.Fatalf("two verifications disagree")
		}
		if err == nil && rep.OK() && (rep.Records != m.Records || rep.LastSeq != m.LastSeq || rep.Head != m.Head || rep.Checkpoints != m.Checkpoints) {
			t.Fatalf("accepted a bundle that does not match its manifest: %+v / %+v", m, rep)
		}
	})
}
