package audit_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/custos-runtime/custos/audit"
)

// lineErr is how ReadJSONL names the line of a record it refuses.
var lineErr = regexp.MustCompile(`^line [1-9][0-9]*: `)

// FuzzReadJSONL feeds arbitrary exports (audit files an operator was handed)
// to ReadJSONL. A refusal is a record that does not parse (ErrRecord, with
// its line number) or a line longer than a record may be; accepted records
// re-encode to an export that ReadJSONL reads back to the same records; an
// error of the callback stops the read and is returned as is.
func FuzzReadJSONL(f *testing.F) {
	rec := `{"kind":"received","prev":"` + audit.Genesis + `","seq":1,"time":"2026-01-01T00:00:00.000000000Z"}`
	if data, err := os.ReadFile(filepath.Join("testdata", "golden.json")); err == nil {
		f.Add(append(bytes.TrimSpace(data), '\n'))
	}
	f.Add([]byte(rec + "\n"))
	f.Add([]byte(rec + "\r\n\n  \n" + rec))
	f.Add([]byte(rec + "\n{\"seq\":1,\"seq\":2}\n"))
	f.Add([]byte(rec + " " + rec))
	f.Add([]byte("\n\n\t\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var encs [][]byte
		err := audit.ReadJSONL(bytes.NewReader(data), func(r audit.Record) error {
			enc, err := r.MarshalJSON()
			if err != nil {
				t.Fatalf("a record ReadJSONL returned does not encode: %v", err)
			}
			encs = append(encs, enc)
			return nil
		})
		if err != nil {
			if !(errors.Is(err, audit.ErrRecord) && lineErr.MatchString(err.Error())) && !errors.Is(err, bufio.ErrTooLong) {
				t.Fatalf("refusal %v is neither a numbered ErrRecord nor a line too long", err)
			}
		}
		// The records before a refusal were delivered in order; an
		// export of them reads back the same.
		export := bytes.Join(encs, []byte("\n"))
		var again [][]byte
		if err := audit.ReadJSONL(bytes.NewReader(export), func(r audit.Record) error {
			enc, _ := r.MarshalJSON()
			again = append(again, enc)
			return nil
		}); err != nil {
			t.Fatalf("re-encoded export does not read: %v\n%s", err, export)
		}
		if len(again) != len(encs) {
			t.Fatalf("%d records read back, want %d", len(again), len(encs))
		}
		for i := range encs {
			if !bytes.Equal(encs[i], again[i]) {
				t.Fatalf("record %d changed:\n%s\n%s", i, encs[i], again[i])
			}
		}
		// The callback's error stops the read at the first record.
		if len(encs) > 0 {
			stop := errors.New("stop")
			n := 0
			err := audit.ReadJSONL(bytes.NewReader(data), func(audit.Record) error { n++; return stop })
			if err != stop || n != 1 {
				t.Fatalf("callback error: got %v after %d calls, want it unchanged after 1", err, n)
			}
		}
	})
}
