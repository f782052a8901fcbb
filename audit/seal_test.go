package audit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// TestSealMatchesFullEncoding: the stored form and hash seal splices
// together are exactly what encoding the whole record gives, for records
// with and without each optional member, odd strings and many seq widths.
func TestSealMatchesFullEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "a", "é \u2028 <&>", `quote " and \ back`, "prev", `"seq":1`, "hash", "\x01", "bad \xff utf-8"}
	pick := func() string { return strs[r.IntN(len(strs))] }
	l := New(NewMemory(), &Options{Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 1, time.UTC) }})
	for i := range 2000 {
		rec := Record{
			Kind: Kind("k" + pick()), MessageID: pick(), CorrelationID: pick(), Sender: pick(),
			Recipient: pick(), Capability: pick(), Profile: pick(), Oversight: pick(), Outcome: pick(),
			Status: pick(), RequestID: pick(), ResolutionID: pick(), TraceID: pick(),
			Actor: Actor{ID: pick(), Type: pick(), AuthenticatedBy: pick()},
		}
		if r.IntN(2) == 0 {
			rec.PayloadHash = fmt.Sprintf("sha256:%064x", i)
		}
		if r.IntN(2) == 0 {
			rec.ASCCode = r.IntN(9000)
		}
		if r.IntN(2) == 0 {
			rec.Details = map[string]any{pick(): pick(), "n": r.IntN(1 << 40), "o": map[string]any{"prev": "x", "seq": []any{1, "}"}}}
		}
		if r.IntN(3) == 0 {
			rec.ARSIA = &compliance.AuditRecord{MessageID: pick(), FromAgent: pick(), Intent: pick()}
		}
		if r.IntN(4) == 0 {
			rec.Details = map[string]any{}
		}
		if r.IntN(2) == 0 {
			rec.Time = time.Unix(r.Int64N(1<<34), r.Int64N(1e9))
		}
		if r.IntN(2) == 0 {
			rec.RetainUntil = time.Unix(r.Int64N(1<<34), 0)
		}
		p, err := l.prepare(rec, true)
		if err != nil {
			t.Fatalf("prepare %d: %v", i, err)
		}
		var last *Record
		if i%3 != 0 {
			last = &Record{Seq: r.Uint64N(maxSeq - 1), Hash: fmt.Sprintf("sha256:%064x", r.Uint64())}
		}
		if full, err := decodeWire(p.c); err != nil || !reflect.DeepEqual(full, p.rec) {
			t.Fatalf("record %d: normalised\n%#v\ndecoded\n%#v (%v)", i, p.rec, full, err)
		}
		s, err := p.seal(last)
		if err != nil {
			t.Fatalf("seal %d: %v", i, err)
		}
		want, err := s.Record.ComputeHash()
		if err != nil || want != s.Record.Hash {
			t.Fatalf("record %d: hash %s, full encoding gives %s (%v)", i, s.Record.Hash, want, err)
		}
		full, err := s.Record.MarshalJSON()
		if err != nil || !bytes.Equal(full, s.JSON) {
			t.Fatalf("record %d: stored\n%s\nfull encoding\n%s (%v)", i, s.JSON, full, err)
		}
		back, err := ParseRecord(s.JSON)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		again, _ := back.MarshalJSON()
		if !bytes.Equal(again, s.JSON) {
			t.Fatalf("record %d: returned record does not round-trip", i)
		}
	}
}
