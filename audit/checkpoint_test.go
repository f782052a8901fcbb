package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/audit"
)

// edKey signs and verifies checkpoints with one Ed25519 key, kid "k1".
type edKey struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newEdKey(t *testing.T) edKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return edKey{pub, priv}
}

func (k edKey) SignCheckpoint(st []byte) (string, string, error) {
	return "k1", base64.RawURLEncoding.EncodeToString(ed25519.Sign(k.priv, st)), nil
}

func (k edKey) VerifyCheckpoint(kid string, st []byte, s string) error {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || kid != "k1" || !ed25519.Verify(k.pub, st, raw) {
		return errors.New("bad signature")
	}
	return nil
}

// export returns the chain as parsed records.
func export(t *testing.T, l *audit.Log) []audit.Record {
	t.Helper()
	var buf bytes.Buffer
	if _, err := l.Export(t.Context(), &buf, 1, 0); err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		rec, err := audit.ParseRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// jsonl writes records as an export.
func jsonl(t *testing.T, recs []audit.Record) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	for _, r := range recs {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(data)
		buf.WriteByte('\n')
	}
	return bytes.NewReader(buf.Bytes())
}

// rehash recomputes every link and hash from index i on, as someone who
// can write the storage but has no key would after changing a record.
func rehash(t *testing.T, recs []audit.Record, i int) {
	t.Helper()
	for ; i < len(recs); i++ {
		recs[i].Prev = audit.Genesis
		if i > 0 {
			recs[i].Prev = recs[i-1].Hash
		}
		h, err := recs[i].ComputeHash()
		if err != nil {
			t.Fatal(err)
		}
		recs[i].Hash = h
	}
}

// A checkpoint vouches for the records before it: the chain verifies with
// the key, a rewrite of an earlier record that recomputes every hash (which
// the chain alone cannot show) no longer does, nor does a checkpoint signed
// by another key; without a key the checkpoints are counted as unchecked.
func TestCheckpoints(t *testing.T) {
	ctx := t.Context()
	key := newEdKey(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	l := audit.New(audit.NewMemory(), &audit.Options{Now: func() time.Time { return now }})
	if _, ok, err := l.Checkpoint(ctx, key); err != nil || ok {
		t.Fatalf("checkpoint of an empty chain: %v, %v", ok, err)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		if _, err := l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: m}); err != nil {
			t.Fatal(err)
		}
	}
	cp, ok, err := l.Checkpoint(ctx, key)
	if err != nil || !ok || cp.Seq != 4 || cp.Kind != audit.KindCheckpoint {
		t.Fatalf("checkpoint: %+v, %v, %v", cp, ok, err)
	}
	if _, ok, err := l.Checkpoint(ctx, key); err != nil || ok {
		t.Fatalf("a second checkpoint with nothing new: %v, %v", ok, err)
	}
	if _, err := l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: "m4"}); err != nil {
		t.Fatal(err)
	}
	rep, err := l.VerifyWith(ctx, audit.VerifyOptions{Checkpoints: key})
	if err != nil || !rep.OK() || rep.Checkpoints != 1 || rep.SignedThrough != 3 || rep.LastSeq != 5 ||
		rep.CheckpointTime != audit.FormatTime(now) {
		t.Fatalf("verify with the key: %+v, %v", rep, err)
	}
	if rep, err := l.Verify(ctx); err != nil || !rep.OK() || rep.UncheckedCheckpoints != 1 || rep.Checkpoints != 0 {
		t.Fatalf("verify without a key: %+v, %v", rep, err)
	}

	recs := export(t, l)
	// Record 2 rewritten, every hash after it recomputed: the chain holds,
	// the checkpoint does not.
	forged := append([]audit.Record(nil), recs...)
	forged[1].MessageID = "forged"
	rehash(t, forged, 1)
	// The checkpoint's own statement still names the old hash of record 3.
	if rep, _ := audit.VerifyJSONL(jsonl(t, forged), audit.VerifyOptions{}); rep.OK() || rep.Problem.Kind != audit.ProblemCheckpoint {
		t.Fatalf("a checkpoint that no longer names the record before it: %+v", rep.Problem)
	}
	// Made to name the new one, it holds without a key, not with it.
	d := map[string]any{}
	for k, v := range forged[3].Details {
		d[k] = v
	}
	d["checkpoint"] = map[string]any{"seq": 3, "hash": forged[2].Hash, "time": audit.FormatTime(now)}
	forged[3].Details = d
	rehash(t, forged, 3)
	if rep, _ := audit.VerifyJSONL(jsonl(t, forged), audit.VerifyOptions{}); !rep.OK() {
		t.Fatalf("the rehashed chain should hold on its own (that is the gap): %+v", rep.Problem)
	}
	rep, _ = audit.VerifyJSONL(jsonl(t, forged), audit.VerifyOptions{Checkpoints: key})
	if rep.OK() || rep.Problem.Kind != audit.ProblemCheckpoint || rep.Problem.Seq != 4 {
		t.Fatalf("a rewrite before the checkpoint: %+v", rep.Problem)
	}
	// A checkpoint re-signed by another key.
	other := newEdKey(t)
	resigned := append([]audit.Record(nil), recs...)
	c, err := audit.CheckpointOf(&resigned[3])
	if err != nil {
		t.Fatal(err)
	}
	_, s, _ := other.SignCheckpoint(c.Statement())
	d = map[string]any{}
	for k, v := range resigned[3].Details {
		d[k] = v
	}
	d["signature"] = s
	resigned[3].Details = d
	rehash(t, resigned, 3)
	rep, _ = audit.VerifyJSONL(jsonl(t, resigned), audit.VerifyOptions{Checkpoints: key})
	if rep.OK() || rep.Problem.Kind != audit.ProblemCheckpoint || !strings.Contains(rep.Problem.Detail, "does not verify") {
		t.Fatalf("a checkpoint signed by another key: %+v", rep.Problem)
	}
}

// failingSigner cannot sign.
type failingSigner struct{}

func (failingSigner) SignCheckpoint([]byte) (string, string, error) {
	return "", "", errors.New("no key")
}

// A checkpoint that cannot be signed writes nothing.
func TestCheckpointSignerFails(t *testing.T) {
	l := audit.New(audit.NewMemory(), nil)
	if _, err := l.Append(t.Context(), audit.Record{Kind: audit.KindReceived, MessageID: "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.Checkpoint(context.Background(), failingSigner{}); err == nil || ok {
		t.Fatalf("checkpoint without a key: %v, %v", ok, err)
	}
	if rep, err := l.Verify(t.Context()); err != nil || rep.Records != 1 {
		t.Fatalf("after a failed checkpoint: %+v, %v", rep, err)
	}
}

// FuzzVerifyCheckpoints feeds arbitrary exports, seeded with a chain that
// holds signed checkpoints, to VerifyJSONL with a checkpoint key: it never
// panics, answers the same twice, and a chain it accepts has every
// verified checkpoint before its end, each naming a record of it.
func FuzzVerifyCheckpoints(f *testing.F) {
	key := edKey{}
	pub, priv, _ := ed25519.GenerateKey(bytes.NewReader(make([]byte, 64)))
	key.pub, key.priv = pub, priv
	l := audit.New(audit.NewMemory(), &audit.Options{Now: func() time.Time { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) },
		CheckpointEvery: 10 * time.Minute})
	ctx := context.Background()
	_, _, _ = l.CheckpointEvent(ctx, key, audit.EventStart)
	for i := range 4 {
		_, _ = l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: "m" + string(rune('0'+i))})
		if i%2 == 1 {
			_, _, _ = l.Checkpoint(ctx, key)
		}
	}
	_, _, _ = l.CheckpointEvent(ctx, key, audit.EventStop)
	var seed bytes.Buffer
	if _, err := l.Export(ctx, &seed, 1, 0); err != nil {
		f.Fatal(err)
	}
	f.Add(seed.Bytes())
	f.Add(bytes.ReplaceAll(seed.Bytes(), []byte(`"signature":"`), []byte(`"signature":"A`)))
	f.Add(bytes.ReplaceAll(seed.Bytes(), []byte(`"checkpoint":{`), []byte(`"checkpoint":{"x":1,`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := audit.VerifyJSONL(bytes.NewReader(data), audit.VerifyOptions{Checkpoints: key})
		again, err2 := audit.VerifyJSONL(bytes.NewReader(data), audit.VerifyOptions{Checkpoints: key})
		if (err == nil) != (err2 == nil) || rep.OK() != again.OK() || rep.Checkpoints != again.Checkpoints || rep.SignedThrough != again.SignedThrough {
			t.Fatalf("two verifications disagree: %+v / %+v", rep, again)
		}
		if err != nil || !rep.OK() || rep.Checkpoints == 0 {
			return
		}
		if rep.SignedThrough < rep.FirstSeq || rep.SignedThrough >= rep.LastSeq {
			t.Fatalf("the last checkpoint names record %d, outside %d..%d", rep.SignedThrough, rep.FirstSeq, rep.LastSeq-1)
		}
		if _, err := time.Parse(time.RFC3339Nano, rep.CheckpointTime); err != nil {
			t.Fatalf("checkpoint time %q: %v", rep.CheckpointTime, err)
		}
	})
}
