package audit_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/audit"
)

// FuzzParseRecord: ParseRecord never panics, and a record it accepts
// encodes to a form that parses back to the same form (so the hash Verify
// recomputes is a function of the record's value) with the same hash.
func FuzzParseRecord(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("testdata", "golden.json")); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"kind":"received","prev":"` + audit.Genesis + `","seq":1,"time":"2026-01-01T00:00:00.000000000Z"}`))
	f.Add([]byte(`{"kind":"purge","prev":"","seq":0,"time":"2026-01-01T00:00:00.000000000Z","details":{"a":[1,2.5,{"b":null}],"c":1e20},"actor":{},"redacted":true}`))
	f.Add([]byte(`{"arsia":{"record_id":"x"},"kind":"x","prev":"p","seq":3,"time":"2026-01-01T00:00:00.000000000Z","retain_until":"2027-01-01T00:00:00.000000000Z"}`))
	f.Add([]byte(`{"seq":1,"seq":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := audit.ParseRecord(data)
		if err != nil {
			return
		}
		enc, err := rec.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted record does not encode: %v\n%s", err, data)
		}
		back, err := audit.ParseRecord(enc)
		if err != nil {
			t.Fatalf("encoded record does not parse: %v\n%s", err, enc)
		}
		enc2, err := back.MarshalJSON()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the record:\n%s\n%s (%v)", enc, enc2, err)
		}
		h1, err1 := rec.ComputeHash()
		h2, err2 := back.ComputeHash()
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("hash changed: %s %v / %s %v", h1, err1, h2, err2)
		}
		// Verify on a one-record chain of it must not panic.
		v := audit.NewVerifier(audit.VerifyOptions{})
		v.Add(1, data)
		_ = v.Report()
	})
}
