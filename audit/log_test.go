package audit_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
)

// failing is a backend whose every operation fails.
type failing struct{ err error }

func (f failing) Append(context.Context, func(*audit.Record) (audit.Record, error)) (audit.Record, error) {
	return audit.Record{}, f.err
}
func (f failing) Range(context.Context, uint64, func(uint64, []byte) error) error { return f.err }
func (f failing) Redact(context.Context, time.Time, func(*audit.Record, []uint64) (audit.Record, error)) (int, error) {
	return 0, f.err
}
func (f failing) Close() error { return nil }

func TestFailClosed(t *testing.T) {
	disk := errors.New("disk full")
	l := audit.New(failing{disk}, nil)
	ctx := context.Background()
	_, err := l.Append(ctx, audittest.Sample(audit.KindReceived, 1))
	if !errors.Is(err, audit.ErrAppend) || !errors.Is(err, disk) {
		t.Fatalf("Append on a failing backend: %v", err)
	}
	if _, err := l.Purge(ctx, time.Now()); !errors.Is(err, audit.ErrAppend) || !errors.Is(err, disk) {
		t.Fatalf("Purge on a failing backend: %v", err)
	}
	if _, err := l.Verify(ctx); !errors.Is(err, disk) {
		t.Fatalf("Verify on a failing backend: %v", err)
	}
	if _, err := l.Export(ctx, &bytes.Buffer{}, 1, 0); !errors.Is(err, disk) {
		t.Fatalf("Export on a failing backend: %v", err)
	}
}

func TestAppendValidation(t *testing.T) {
	ctx := context.Background()
	l := audit.New(audit.NewMemory(), nil)
	tests := []struct {
		name string
		mod  func(*audit.Record)
	}{
		{"no kind", func(r *audit.Record) { r.Kind = "" }},
		{"seq set", func(r *audit.Record) { r.Seq = 1 }},
		{"prev set", func(r *audit.Record) { r.Prev = audit.Genesis }},
		{"hash set", func(r *audit.Record) { r.Hash = audit.Genesis }},
		{"redacted", func(r *audit.Record) { r.Redacted = true }},
		{"payload hash without prefix", func(r *audit.Record) { r.PayloadHash = strings.Repeat("a", 64) }},
		{"payload hash upper case", func(r *audit.Record) { r.PayloadHash = "sha256:" + strings.Repeat("A", 64) }},
		{"unsafe integer in details", func(r *audit.Record) { r.Details = map[string]any{"n": int64(1) << 62} }},
		{"unencodable details", func(r *audit.Record) { r.Details = map[string]any{"f": func() {}} }},
		{"time out of range", func(r *audit.Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"too big", func(r *audit.Record) { r.Details = map[string]any{"x": strings.Repeat("a", audit.MaxRecordSize)} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := audittest.Sample(audit.KindReceived, 1)
			tc.mod(&rec)
			if _, err := l.Append(ctx, rec); !errors.Is(err, audit.ErrAppend) || !errors.Is(err, audit.ErrRecord) {
				t.Fatalf("Append: %v, want ErrAppend and ErrRecord", err)
			}
		})
	}
	rep, err := l.Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != 0 {
		t.Fatalf("after refused appends: %+v, %v", rep, err)
	}
}

func TestAppendDoesNotAliasCaller(t *testing.T) {
	ctx := context.Background()
	l := audit.New(audit.NewMemory(), nil)
	rec := audittest.Sample(audit.KindReceived, 1)
	out, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Details["note"] = "changed after append"
	if out.Details["note"] != "sample" {
		t.Fatalf("returned record aliases the caller's details")
	}
	rep, _ := l.Verify(ctx)
	if !rep.OK() {
		t.Fatal(rep.Err())
	}
	if out.Time.Location() != time.UTC || out.Time.IsZero() {
		t.Fatalf("time %v", out.Time)
	}
}

// memChain builds a memory-backed chain of n records and returns the
// backend and its rows.
func memChain(t *testing.T, n int) (*audit.Memory, []uint64, [][]byte) {
	t.Helper()
	m := audit.NewMemory()
	l := audit.New(m, nil)
	for i := 1; i <= n; i++ {
		if _, err := l.Append(context.Background(), audittest.Sample(audit.KindReceived, i)); err != nil {
			t.Fatal(err)
		}
	}
	seqs, data := m.Rows()
	return m, seqs, data
}

func TestVerifyTable(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(seqs []uint64, data [][]byte) ([]uint64, [][]byte)
		kind   audit.ProblemKind
		seq    uint64
	}{
		{"intact", func(s []uint64, d [][]byte) ([]uint64, [][]byte) { return s, d }, "", 0},
		{"altered byte", func(s []uint64, d [][]byte) ([]uint64, [][]byte) {
			d[2] = bytes.Replace(d[2], []byte("msg-0003"), []byte("msg-0009"), 1)
			return s, d
		}, audit.ProblemAltered, 3},
		{"removed last but one", func(s []uint64, d [][]byte) ([]uint64, [][]byte) {
			return append(s[:3:3], s[4]), append(d[:3:3], d[4])
		}, audit.ProblemRemoved, 4},
		{"swapped rows", func(s []uint64, d [][]byte) ([]uint64, [][]byte) {
			d[1], d[2] = d[2], d[1]
			return s, d
		}, audit.ProblemReordered, 2},
		{"duplicated row", func(s []uint64, d [][]byte) ([]uint64, [][]byte) {
			return append([]uint64{1, 2, 3}, s[2:]...), append([][]byte{d[0], d[1], d[2]}, d[2:]...)
		}, audit.ProblemInserted, 3},
		{"reversed", func(s []uint64, d [][]byte) ([]uint64, [][]byte) {
			for i, j := 0, len(d)-1; i < j; i, j = i+1, j-1 {
				d[i], d[j] = d[j], d[i]
			}
			return s, d
		}, audit.ProblemRemoved, 1}, // starts at 5: 1..4 look removed, then 4 refines below
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, seqs, data := memChain(t, 5)
			m.SetRows(tc.tamper(seqs, data))
			rep, err := audit.New(m, nil).Verify(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tc.kind == "" {
				if !rep.OK() || rep.Records != 5 {
					t.Fatalf("intact chain: %+v", rep)
				}
				return
			}
			if tc.name == "reversed" {
				// 5 first: 1..4 missing, then 4 turns up: reordered.
				if rep.Problem == nil || rep.Problem.Kind != audit.ProblemReordered || rep.Problem.Seq != 4 {
					t.Fatalf("reversed: %+v", rep.Problem)
				}
				return
			}
			if p := rep.Problem; p == nil || p.Kind != tc.kind || p.Seq != tc.seq {
				t.Fatalf("Verify: %+v, want %s at %d", p, tc.kind, tc.seq)
			}
			if !errors.Is(rep.Err(), audit.ErrTampered) {
				t.Fatalf("Err() does not match ErrTampered")
			}
		})
	}
}

func TestVerifyJSONLExport(t *testing.T) {
	m, _, _ := memChain(t, 4)
	var buf bytes.Buffer
	if _, err := audit.New(m, nil).Export(context.Background(), &buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	rep, err := audit.VerifyJSONL(strings.NewReader(strings.Join(lines, "\n")), audit.VerifyOptions{})
	if err != nil || !rep.OK() || rep.Records != 4 {
		t.Fatalf("VerifyJSONL: %+v %v", rep, err)
	}
	lines[1], lines[2] = lines[2], lines[1]
	rep, _ = audit.VerifyJSONL(strings.NewReader(strings.Join(lines, "\n")), audit.VerifyOptions{})
	if rep.Problem == nil || rep.Problem.Kind != audit.ProblemReordered {
		t.Fatalf("swapped lines: %+v", rep.Problem)
	}
	rep, _ = audit.VerifyJSONL(strings.NewReader(lines[0]+"\nnot json\n"), audit.VerifyOptions{})
	if rep.Problem == nil || rep.Problem.Kind != audit.ProblemAltered || rep.Problem.Seq != 2 {
		t.Fatalf("garbage line: %+v", rep.Problem)
	}
}

func TestProfileRetention(t *testing.T) {
	t0 := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	pol := audit.ProfileRetention(nil, 24*time.Hour)
	reg := compliance.Default()
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		got := pol(audit.Record{Time: t0, Profile: name})
		days := 0
		if p.Defaults.RetentionDays != nil {
			days = *p.Defaults.RetentionDays
		}
		if f, ok := compliance.RetentionFloor(name); ok {
			days = max(days, f)
		}
		want := t0.Add(24 * time.Hour)
		if days > 0 {
			want = t0.AddDate(0, 0, days)
		}
		if !got.Equal(want) {
			t.Errorf("%s: retain until %v, want %v", name, got, want)
		}
	}
	if got := pol(audit.Record{Time: t0, Profile: "MIFID-II"}); got.Before(t0.AddDate(0, 0, 1827)) {
		t.Errorf("MIFID-II retention %v below the 1827-day floor", got)
	}
	if got := audit.ProfileRetention(nil, 0)(audit.Record{Time: t0, Profile: "unknown"}); !got.IsZero() {
		t.Errorf("unknown profile without fallback: %v, want forever", got)
	}
	// Through the Log: retain_until is filled from the profile.
	l := audit.New(audit.NewMemory(), &audit.Options{Now: func() time.Time { return t0 }, Retention: pol})
	rec, err := l.Append(context.Background(), audit.Record{Kind: audit.KindReceived, Profile: "DORA"})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.RetainUntil.Equal(t0.AddDate(0, 0, 1827)) {
		t.Errorf("DORA record retain_until %v", rec.RetainUntil)
	}
}

func TestFromARSIA(t *testing.T) {
	env := map[string]any{
		"id": "msg-1", "from": "did:web:a.example", "to": "did:web:b.example", "intent": "payments.transfer",
		"payload":    map[string]any{"type": "transfer", "amount": "12.50"},
		"compliance": map[string]any{"profile": "MIFID-II"},
	}
	ar, err := compliance.NewAuditRecord(env, nil, compliance.AuditInput{
		RecordID: "0b4a4f1e-7c1d-4a7e-9b1c-2f3e4d5c6b7a", EventType: "request", OperatorID: "op-1",
		ProcessedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := audit.FromARSIA(ar)
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := audit.PayloadHashValue(env["payload"])
	if rec.MessageID != "msg-1" || rec.Sender != "did:web:a.example" || rec.Recipient != "did:web:b.example" ||
		rec.Capability != "payments.transfer" || rec.Profile != "MIFID-II" || rec.PayloadHash != ph ||
		rec.Kind != audit.KindReceived || rec.ARSIA == nil || rec.ARSIA.RecordID != ar.RecordID {
		t.Fatalf("FromARSIA: %+v", rec)
	}
	if !rec.RetainUntil.Equal(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).AddDate(0, 0, 1827)) {
		t.Fatalf("retain_until %v", rec.RetainUntil)
	}
	l := audit.New(audit.NewMemory(), nil)
	out, err := l.Append(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if out.ARSIA == nil || *out.ARSIA != *ar {
		t.Fatalf("ARSIA record not kept: %+v", out.ARSIA)
	}
	if rep, _ := l.Verify(context.Background()); !rep.OK() {
		t.Fatal(rep.Err())
	}
	if _, err := audit.FromARSIA(nil); err == nil {
		t.Fatal("FromARSIA(nil) succeeded")
	}
}

// A prepared record is checked up front, appended like any other, and may
// be appended again (a retried unit of work): each time it links to the
// chain as it is then.
func TestPrepared(t *testing.T) {
	ctx := context.Background()
	l := audit.New(audit.NewMemory(), nil)
	if _, err := l.Prepare(audit.Record{}); !errors.Is(err, audit.ErrAppend) || !errors.Is(err, audit.ErrRecord) {
		t.Fatalf("Prepare without a kind: %v", err)
	}
	if _, err := l.AppendPrepared(ctx, audit.Prepared{}); !errors.Is(err, audit.ErrAppend) {
		t.Fatalf("AppendPrepared of nothing: %v", err)
	}
	p, err := l.Prepare(audit.Record{Kind: audit.KindReceived, MessageID: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.AppendPrepared(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.AppendPrepared(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Seq != 1 || b.Seq != 2 || b.Prev != a.Hash || a.Hash == b.Hash {
		t.Fatalf("records %d %s, %d prev %s", a.Seq, a.Hash, b.Seq, b.Prev)
	}
	if rep, err := l.Verify(ctx); err != nil || !rep.OK() || rep.Records != 2 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}
