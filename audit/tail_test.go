package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/audit"
)

// life writes: start, two records, interval checkpoint, one record, stop;
// and returns the log's records.
func life(t *testing.T, key edKey, now time.Time) []audit.Record {
	t.Helper()
	ctx := t.Context()
	l := audit.New(audit.NewMemory(), &audit.Options{Now: func() time.Time { return now }, CheckpointEvery: 10 * time.Minute})
	step := func(ev string) {
		if _, ok, err := l.CheckpointEvent(ctx, key, ev); err != nil || !ok {
			t.Fatalf("%s: %v %v", ev, ok, err)
		}
	}
	rec := func(m string) {
		if _, err := l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: m}); err != nil {
			t.Fatal(err)
		}
	}
	step(audit.EventStart)
	rec("m1")
	rec("m2")
	step(audit.EventInterval)
	rec("m3")
	step(audit.EventStop)
	return export(t, l)
}

// How the verifier tells a truncation it can prove (a checkpoint held
// outside the chain names a record beyond its end) from one it can only
// suspect (records older than the promise allows, without a checkpoint)
// from what it cannot see at all (a chain cut right after a checkpoint).
func TestTailTruncation(t *testing.T) {
	key := newEdKey(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	recs := life(t, key, now)
	if len(recs) != 6 {
		t.Fatalf("%d records", len(recs))
	}
	head, err := audit.HeadOf(recs[5], "head file H", key)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(24 * time.Hour)
	for _, tc := range []struct {
		name   string
		recs   []audit.Record
		heads  []audit.Head
		kind   audit.ProblemKind // "" : verifies
		tail   audit.TailStatus
		detail string
	}{
		{"whole", recs, []audit.Head{head}, "", audit.TailCleanStop, "clean-stop"},
		{"stop removed, head held", recs[:5], []audit.Head{head}, audit.ProblemTruncated, "", "at least records 6 to 6 were removed after a signed checkpoint"},
		{"cut after the interval checkpoint, head held", recs[:4], []audit.Head{head}, audit.ProblemTruncated, "", "the chain ends at record 4, but head file H holds checkpoint record 6"},
		{"stop removed, no head: overdue", recs[:5], nil, "", audit.TailOverdue, "suspected, not proven"},
		{"cut after a checkpoint, no head: cannot tell", recs[:4], nil, "", audit.TailCheckpointed, "the chain cannot tell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := audit.VerifyJSONL(jsonl(t, tc.recs), audit.VerifyOptions{Checkpoints: key, Heads: tc.heads, Now: later})
			if err != nil {
				t.Fatal(err)
			}
			if tc.kind != "" {
				if rep.OK() || rep.Problem.Kind != tc.kind || !strings.Contains(rep.Problem.Detail, tc.detail) {
					t.Fatalf("problem %+v, want %s with %q", rep.Problem, tc.kind, tc.detail)
				}
				return
			}
			if !rep.OK() || rep.Tail.Status != tc.tail || !strings.Contains(rep.Tail.Detail, tc.detail) {
				t.Fatalf("report %+v tail %+v, want %s with %q", rep.Problem, rep.Tail, tc.tail, tc.detail)
			}
		})
	}
	// Rewritten from record 3 on (and rehashed) while the head file
	// keeps the original last checkpoint: the head no longer matches.
	forged := append([]audit.Record(nil), recs...)
	forged[2].MessageID = "forged"
	rehash(t, forged, 2)
	if rep, _ := audit.VerifyJSONL(jsonl(t, forged), audit.VerifyOptions{Heads: []audit.Head{head}}); rep.OK() {
		t.Fatal("a rewrite under a head verifies")
	}
	// A chain rewritten whole (another life, same length) does not hold
	// the head.
	other := life(t, key, now.Add(time.Second))
	rep, _ := audit.VerifyJSONL(jsonl(t, other), audit.VerifyOptions{Checkpoints: key, Heads: []audit.Head{head}})
	if rep.OK() || rep.Problem.Kind != audit.ProblemAltered || rep.Problem.Seq != 6 || !strings.Contains(rep.Problem.Detail, "head file H") {
		t.Fatalf("a rewritten chain under a head: %+v", rep.Problem)
	}
	// A head that is not a signed checkpoint is refused.
	if _, err := audit.HeadOf(recs[1], "x", key); err == nil {
		t.Fatal("a plain record as a head")
	}
	if _, err := audit.HeadOf(recs[5], "x", newEdKey(t)); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a head signed by another key: %v", err)
	}
}

// A checkpoint's signed members cannot be changed: making the stop
// checkpoint look like an interval one (or a start claim another finding)
// breaks its signature, or its consistency with the chain.
func TestCheckpointEventTamper(t *testing.T) {
	key := newEdKey(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	recs := life(t, key, now)
	edit := func(i int, member string, v any) []audit.Record {
		out := append([]audit.Record(nil), recs...)
		d := map[string]any{}
		for k, x := range out[i].Details {
			d[k] = x
		}
		c := map[string]any{}
		for k, x := range d["checkpoint"].(map[string]any) {
			c[k] = x
		}
		if v == nil {
			delete(c, member)
		} else {
			c[member] = v
		}
		d["checkpoint"] = c
		out[i].Details = d
		rehash(t, out, i)
		return out
	}
	for _, tc := range []struct {
		name   string
		recs   []audit.Record
		detail string
	}{
		{"stop made interval", edit(5, "event", audit.EventInterval), "does not verify"},
		{"every changed", edit(3, "every", 60), "does not verify"},
		{"every removed", edit(3, "every", nil), "does not verify"},
		{"found changed", edit(0, "found", audit.FoundCleanStop), "found clean_stop"},
		{"unknown event", edit(3, "event", "nap"), "unknown event"},
		{"found on a stop", edit(5, "found", audit.FoundEmpty), "start checkpoint alone"},
		{"a promise on a stop", edit(5, "every", 600), "stop checkpoint makes no promise"},
		{"an unknown member", edit(3, "x", 1), "unknown members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := audit.VerifyJSONL(jsonl(t, tc.recs), audit.VerifyOptions{Checkpoints: key})
			if err != nil || rep.OK() || rep.Problem.Kind != audit.ProblemCheckpoint || !strings.Contains(rep.Problem.Detail, tc.detail) {
				t.Fatalf("%+v, %v; want bad_checkpoint with %q", rep.Problem, err, tc.detail)
			}
		})
	}
}

// FuzzHeadOf: a head file's record, whatever it holds, is accepted only
// as a sealed checkpoint record naming the record before it; never a
// panic.
func FuzzHeadOf(f *testing.F) {
	key := edKey{}
	key.pub, key.priv, _ = ed25519.GenerateKey(bytes.NewReader(make([]byte, 64)))
	l := audit.New(audit.NewMemory(), &audit.Options{CheckpointEvery: time.Minute})
	ctx := context.Background()
	_, _ = l.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: "m1"})
	rec, _, err := l.CheckpointEvent(ctx, key, audit.EventStop)
	if err != nil {
		f.Fatal(err)
	}
	data, _ := rec.MarshalJSON()
	f.Add(data)
	f.Add(bytes.Replace(data, []byte(`"stop"`), []byte(`"start"`), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := audit.ParseRecord(data)
		if err != nil {
			return
		}
		h, err := audit.HeadOf(rec, "fuzz", key)
		if err != nil {
			return
		}
		if h.Seq != rec.Seq || h.Hash != rec.Hash || rec.Kind != audit.KindCheckpoint {
			t.Fatalf("head %+v of %+v", h, rec)
		}
	})
}
