package filestore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func fuzzNow() time.Time { return time.Date(2026, 9, 27, 15, 4, 5, 0, time.UTC) }

// FuzzStateFile feeds arbitrary bytes as the state file. The store must
// never panic and never read damaged state as empty: either the bytes are
// a valid document and operations see exactly it, or they are refused
// (quarantined, newer schema, too large) and the data is kept.
func FuzzStateFile(f *testing.F) {
	for _, seed := range []string{
		``, `{`, `[]`, `null`, `{"schema":"aais.store.v1","store_id":"a"}`,
		`{"schema":"aais.store.v1","store_id":"a","sequence":3,"compacted_through":3,"events":[]}`,
		`{"schema":"aais.store.v2","store_id":"a"}`,
		`{"schema":"aais.store.v1","store_id":"a","events":{}}`,
		`{"schema":"aais.store.v1","store_id":"a","pending":{"apr_1":{"type":"approval.requested","sequence":1,"request":{"id":"apr_1"}}}}`,
		`{"schema":"aais.store.v1","store_id":"a","owners":{"x":5},"extensions":{"custos.dev/fingerprints":{"x":"y"}}}`,
		"{\"schema\":\"aais.store.v1\",\"store_id\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "approvals.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		want, perr := parseDocument(data)
		s, err := Open(path, &Options{Now: fuzzNow, MaxBytes: 1 << 20, LockTimeout: time.Minute})
		if err != nil {
			if !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("Open: %v", err)
			}
			var ve *versionError
			if !errors.As(perr, &ve) {
				t.Fatalf("Open refused a document parse judged %v", perr)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Fatal("a newer-schema file was changed")
			}
			return
		}
		defer s.Close()
		pending, asOf, err := s.Pending(t.Context())
		if perr != nil {
			var rr *RecoveryRequiredError
			if !errors.As(err, &rr) {
				t.Fatalf("damaged state (%v) read as %d pending as of %d, err %v", perr, len(pending), asOf, err)
			}
			if got, rerr := os.ReadFile(rr.QuarantinedTo); rerr != nil || !bytes.Equal(got, data) {
				t.Fatalf("quarantined bytes not kept: %v", rerr)
			}
			return
		}
		if err != nil {
			// A document that is well-formed but whose envelopes do not
			// parse as AAIS messages fails the read; that is not empty.
			return
		}
		if asOf != want.seq {
			t.Fatalf("as of %d, document sequence %d", asOf, want.seq)
		}
		n := 0
		for id := range want.pending {
			if _, ok := want.resolutions[id]; !ok {
				n++
			}
		}
		if len(pending) != n {
			t.Fatalf("%d pending read, the document holds %d", len(pending), n)
		}
	})
}

func TestCacheAvoidsReparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	base := s.parses.Load() + other.parses.Load()
	for range 5 {
		if _, _, err := s.Pending(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := other.ID(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.parses.Load() + other.parses.Load() - base; n != 0 {
		t.Fatalf("%d parses of an unchanged file", n)
	}
	// A change made behind the store's back is seen.
	if err := os.WriteFile(path, []byte(`{"schema":"aais.store.v1","store_id":"replaced","sequence":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if id, err := s.ID(t.Context()); err != nil || id != "replaced" {
		t.Fatalf("ID after an outside change = %q, %v", id, err)
	}
}

func TestSequenceHint(t *testing.T) {
	got := sequenceHint([]byte(`{"sequence": 9, "x": {"as_of_sequence":12}, "presenter_sequence":3, "sequence":"40"}`))
	if got != 12 {
		t.Fatalf("hint = %d, want 12", got)
	}
}

func TestLockTimeoutAndContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	s, err := Open(path, &Options{LockTimeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Another process holding the file lock, as far as flock is
	// concerned: a separate open file description.
	f, err := openLockFile(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := tryLock(f); !ok || err != nil {
		t.Fatalf("tryLock = %v, %v", ok, err)
	}
	if _, err := s.ID(t.Context()); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("ID while another holder has the lock: %v, want ErrLockTimeout", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.ID(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("ID with a cancelled context: %v", err)
	}
	unlock(f)
	f.Close()
	if _, err := s.ID(t.Context()); err != nil {
		t.Fatalf("ID after release: %v", err)
	}
	// Held in this process by another Store on the same path.
	other, err := Open(path, &Options{LockTimeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ID(t.Context()); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("ID while another Store holds the lock: %v, want ErrLockTimeout", err)
	}
	tx.end()
}

func TestReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, _ := s.ID(t.Context())
	if err := os.WriteFile(path, []byte(`{"schema":"aais.store.v1","store_id":"x","sequence":4,"compacted_through":4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, _ := s.ID(t.Context())
	if after == before || after == "x" || after == "" {
		t.Fatalf("ID after Reset = %q (before %q)", after, before)
	}
	p, err := s.EventsAfter(t.Context(), 4, 0)
	if err != nil || !p.Gap || p.Latest != 0 || p.CompactedThrough != 0 {
		t.Fatalf("EventsAfter(4) after Reset = %+v, %v; want a gap on an empty store", p, err)
	}
}
