package aais

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics, fails only with a *ValidationError, and
// whatever it accepts marshals to JSON that parses back to the same
// message and marshals to the same bytes, with the same action digest.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.json")
	for _, name := range append(seeds, golden...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"aais":"1.0","type":"approval.activity","id":"e","occurred_at":"2026-08-30T18:00:00+02:00","sequence":4.1e1,"activity":{"request_id":"r","message":"m"}}`))
	f.Add([]byte(`{"aais":"1.0","type":"approval.snapshot","id":"e","occurred_at":"2026-08-30T18:00:00.5Z","sequence":0,"snapshot":{"as_of_sequence":0,"pending":[]},"extensions":{}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m1, err := Parse(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Issues) == 0 || !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection is not a *ValidationError with issues: %v", err)
			}
			return
		}
		b1, err := Marshal(m1)
		if err != nil {
			t.Fatalf("accepted but does not marshal: %v\n%s", err, data)
		}
		m2, err := Parse(b1)
		if err != nil {
			t.Fatalf("marshalled form rejected: %v\n%s", err, b1)
		}
		if !reflect.DeepEqual(m1, m2) {
			t.Fatalf("parse∘marshal∘parse changed the message\n%s\n%s", data, b1)
		}
		b2, err := Marshal(m2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("marshal not stable: %v\n%s\n%s", err, b1, b2)
		}
		if m1.Request != nil {
			d1, err1 := m1.Request.Action.Digest()
			d2, err2 := m2.Request.Action.Digest()
			if err1 != nil || err2 != nil || d1 != d2 || d1 != m1.Request.ActionDigest {
				t.Fatalf("digest changed: %s %s %s", d1, d2, m1.Request.ActionDigest)
			}
		}
	})
}

// FuzzNewAction: building an action from arbitrary raw JSON never panics,
// and an accepted action's digest is ActionDigest of its bytes.
func FuzzNewAction(f *testing.F) {
	f.Add([]byte(`{"kind":"a","name":"b","summary":"c","arguments":{"x":[],"y":false}}`))
	f.Add([]byte(`{"kind":"a","name":"b","summary":"c","arguments":{},"presentation":{"redacted":true}}`))
	f.Add([]byte(`{"kind":"a","kind":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := NewAction(json.RawMessage(data))
		if err != nil {
			return
		}
		d1, err := a.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d2, err := ActionDigest(data); err != nil || d1 != d2 {
			t.Fatalf("digest of the kept bytes %s differs from the input's %s (%v)", d1, d2, err)
		}
	})
}
