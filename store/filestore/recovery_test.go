package filestore_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/store/filestore"
)

func TestUndecodableStateQuarantined(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "approvals.json")
	damaged := []byte(`{"schema":"aais.store.v1","store_id":"abc","sequence": 9,"pending":{"apr_1":{"aais":"1.0","sequ`)
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	o := &filestore.Options{Now: fixedNow}
	s := open(t, path, o)
	other := open(t, path, o)
	for i, st := range []*filestore.Store{s, other, s} {
		_, _, err := st.Pending(t.Context())
		rr := wantRecovery(t, err)
		if rr.SequenceHint != 9 || rr.Path != s.Path() || !strings.Contains(rr.Reason, "JSON") {
			t.Fatalf("handle %d: %+v; want hint 9 and a JSON reason", i, rr)
		}
		if want := path + ".corrupt-20260927T160405Z"; rr.QuarantinedTo != want {
			t.Fatalf("quarantined to %q, want %q", rr.QuarantinedTo, want)
		}
	}
	if _, err := s.RequestState(t.Context(), "apr_1"); err == nil {
		t.Fatal("RequestState succeeded on a store needing recovery")
	}
	if _, _, err := authority(t, s).Create(t.Context(), newRequest(t, "apr_x")); !errors.Is(err, filestore.ErrRecoveryRequired) {
		t.Fatalf("Create: %v", err)
	}
	if got, err := os.ReadFile(path + ".corrupt-20260927T160405Z"); err != nil || !bytes.Equal(got, damaged) {
		t.Fatalf("quarantined file: %v", err)
	}
	if rr, err := other.RecoveryStatus(); err != nil || rr == nil || rr.SequenceHint != 9 {
		t.Fatalf("RecoveryStatus = %+v, %v", rr, err)
	}
	// A new handle opens (so an operator can acknowledge) but is blocked.
	third := open(t, path, o)
	if _, err := third.ID(t.Context()); !errors.Is(err, filestore.ErrRecoveryRequired) {
		t.Fatalf("ID on a new handle: %v", err)
	}

	start := uint64(20)
	if err := other.AcknowledgeRecovery(t.Context(), &start); err != nil {
		t.Fatalf("AcknowledgeRecovery: %v", err)
	}
	if rr, err := s.RecoveryStatus(); rr != nil || err != nil {
		t.Fatalf("RecoveryStatus after acknowledge = %v, %v", rr, err)
	}
	ev := create(t, authority(t, s), "apr_new")
	if ev.Sequence != 21 {
		t.Fatalf("first sequence after recovery = %d, want 21", ev.Sequence)
	}
	p, err := s.EventsAfter(t.Context(), 1, 0)
	if err != nil || !p.Gap || p.CompactedThrough != 20 || p.Latest != 21 {
		t.Fatalf("EventsAfter(1) = gap %v compacted %d latest %d, %v; want a gap", p.Gap, p.CompactedThrough, p.Latest, err)
	}
	if p, err := s.EventsAfter(t.Context(), 20, 0); err != nil || p.Gap || len(p.Events) != 1 {
		t.Fatalf("EventsAfter(20) = gap %v, %d events, %v", p.Gap, len(p.Events), err)
	}
	// Acknowledging again is a no-op.
	if err := s.AcknowledgeRecovery(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidStateQuarantined(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	doc := `{"compacted_through":0,"decisions":{},"events":{},"extensions":{},"owners":{},"pending":{},` +
		`"presenter_sequence":0,"resolutions":{},"schema":"aais.store.v1","sequence":5,"store_id":"abc"}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, &filestore.Options{Now: fixedNow})
	for range 2 {
		_, err := s.EventsAfter(t.Context(), 0, 0)
		rr := wantRecovery(t, err)
		if !strings.Contains(rr.Reason, "events") || rr.SequenceHint != 5 {
			t.Fatalf("reason %q hint %d; want one naming events, hint 5", rr.Reason, rr.SequenceHint)
		}
	}
	if err := s.AcknowledgeRecovery(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if ev := create(t, authority(t, s), "apr_1"); ev.Sequence != 6 {
		t.Fatalf("sequence after recovery = %d, want 6", ev.Sequence)
	}
	if p, err := s.EventsAfter(t.Context(), 1, 0); err != nil || !p.Gap {
		t.Fatalf("EventsAfter(1): gap %v, %v; want a gap", p.Gap, err)
	}
}

func TestOtherCorruptInputsQuarantined(t *testing.T) {
	for name, data := range map[string]string{
		"invalid UTF-8":   "{\"schema\":\"aais.store.v1\",\"store_id\":\"\xff\"}",
		"array":           `[]`,
		"string sequence": `{"schema":"aais.store.v1","store_id":"a","sequence":"x"}`,
		"empty":           ``,
		"unknown schema":  `{"schema":"something.else","store_id":"a"}`,
		"no store id":     `{"schema":"aais.store.v1","sequence":1}`,
		"bad pending":     `{"schema":"aais.store.v1","store_id":"a","pending":{"apr_1":{"type":"approval.requested","sequence":1,"request":{"id":"apr_2"}}}}`,
		"float sequence":  `{"schema":"aais.store.v1","store_id":"a","sequence":1.5}`,
		"bad owner":       `{"schema":"aais.store.v1","store_id":"a","owners":{"apr_1":{"pid":0,"host_id":"h"}}}`,
		"bad rules":       `{"schema":"aais.store.v1","store_id":"a","extensions":{"custos.dev/rules":[{"id":"x"}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "approvals.json")
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			s := open(t, path, &filestore.Options{Now: fixedNow})
			_, _, err := s.Pending(t.Context())
			wantRecovery(t, err)
			if _, err := os.Stat(path + ".corrupt-20260927T160405Z"); err != nil {
				t.Fatalf("quarantined file missing: %v", err)
			}
		})
	}
}

func TestQuarantineNameCollision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, &filestore.Options{Now: fixedNow})
	_, err := s.ID(t.Context())
	if rr := wantRecovery(t, err); rr.QuarantinedTo != path+".corrupt-20260927T160405Z" {
		t.Fatalf("quarantined to %s", rr.QuarantinedTo)
	}
	// The operator restores a damaged file: acknowledging checks it and
	// quarantines it in turn, under the next free name.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	rr := wantRecovery(t, s.AcknowledgeRecovery(t.Context(), nil))
	if rr.QuarantinedTo != path+".corrupt-20260927T160405Z-1" {
		t.Fatalf("second quarantine went to %s", rr.QuarantinedTo)
	}
	if _, err := s.ID(t.Context()); !errors.Is(err, filestore.ErrRecoveryRequired) {
		t.Fatalf("ID after a failed acknowledge: %v", err)
	}
}

func TestAcknowledgeRestoredFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	o := &filestore.Options{Now: fixedNow}
	s := open(t, path, o)
	create(t, authority(t, s), "apr_1")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.ID(t.Context())
	wantRecovery(t, err)
	// A damaged restore is quarantined again.
	if err := os.WriteFile(path, []byte("[1]"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantRecovery(t, s.AcknowledgeRecovery(t.Context(), nil))
	// A good restore is used as it is.
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.AcknowledgeRecovery(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestState(t.Context(), "apr_1"); err != nil {
		t.Fatalf("restored request: %v", err)
	}
}

func TestUnreadableMarkerBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	s := open(t, path, nil)
	if err := os.WriteFile(path+".recovery-required", []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.ID(t.Context())
	rr := wantRecovery(t, err)
	if !strings.Contains(rr.Reason, "cannot be read") {
		t.Fatalf("reason %q", rr.Reason)
	}
	if err := s.AcknowledgeRecovery(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ID(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	doc := []byte(`{"schema":"aais.store.v99","store_id":"x","whatever":[1,2,3]}`)
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.Open(path, nil); !errors.Is(err, filestore.ErrUnsupportedVersion) {
		t.Fatalf("Open: %v, want ErrUnsupportedVersion", err)
	}
	// Also when the file changes under an open handle.
	other := filepath.Join(t.TempDir(), "approvals.json")
	s := open(t, other, nil)
	if err := os.WriteFile(other, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Pending(t.Context()); !errors.Is(err, filestore.ErrUnsupportedVersion) {
		t.Fatalf("Pending: %v, want ErrUnsupportedVersion", err)
	}
	for _, p := range []string{path, other} {
		if got, _ := os.ReadFile(p); !bytes.Equal(got, doc) {
			t.Fatalf("%s changed: %s", p, got)
		}
		if _, err := os.Stat(p + ".recovery-required"); !os.IsNotExist(err) {
			t.Fatalf("marker written for a newer schema: %v", err)
		}
	}
}

func TestSymlinksRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	s := open(t, target, nil)
	s.Close()
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks: %v", err)
	}
	if _, err := filestore.Open(link, nil); !errors.Is(err, filestore.ErrSymlink) {
		t.Fatalf("Open(symlink) = %v, want ErrSymlink", err)
	}
	lockLinked := filepath.Join(dir, "locked.json")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), lockLinked+".lock"); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.Open(lockLinked, nil); !errors.Is(err, filestore.ErrSymlink) {
		t.Fatalf("Open with a symlinked lock file = %v, want ErrSymlink", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); !os.IsNotExist(err) {
		t.Fatal("the lock symlink was followed")
	}
}

func TestMaxBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	s := open(t, path, &filestore.Options{MaxBytes: 4000, Now: fixedNow})
	a := authority(t, s)
	create(t, a, "apr_1")
	before, _ := os.ReadFile(path)
	var err error
	for i := 2; err == nil && i < 20; i++ {
		before, _ = os.ReadFile(path)
		_, _, err = a.Create(t.Context(), newRequest(t, "apr_"+string(rune('a'+i))))
	}
	if !errors.Is(err, filestore.ErrTooLarge) {
		t.Fatalf("growing past MaxBytes: %v, want ErrTooLarge", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("a refused write changed the file")
	}
	// A file over the limit is refused, not quarantined.
	if _, err := filestore.Open(path, &filestore.Options{MaxBytes: 100}); !errors.Is(err, filestore.ErrTooLarge) {
		t.Fatalf("Open over MaxBytes = %v, want ErrTooLarge", err)
	}
	if _, err := os.Stat(path + ".recovery-required"); !os.IsNotExist(err) {
		t.Fatal("an oversized file was quarantined")
	}
	if _, _, err := s.Pending(t.Context()); err != nil {
		t.Fatalf("the file is still usable with the larger limit: %v", err)
	}
}

func TestLeftoverTempFileRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "approvals.json")
	s := open(t, path, &filestore.Options{Now: fixedNow})
	// A writer that crashed between creating and renaming its file.
	leftover := filepath.Join(dir, ".approvals.json.12345.tmp")
	if err := os.WriteFile(leftover, []byte(`{"half":`), 0o600); err != nil {
		t.Fatal(err)
	}
	unrelated := filepath.Join(dir, ".other.json.1.tmp")
	if err := os.WriteFile(unrelated, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	create(t, authority(t, s), "apr_1")
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover temp file still there: %v", err)
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Fatalf("another file's temp removed: %v", err)
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("state file mode %v, %v; want 0600", fi.Mode(), err)
		}
	}
}

func TestFailedWriteChangesNothing(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("needs a directory the test cannot write (not as root, not on Windows)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "approvals.json")
	s := open(t, path, &filestore.Options{Now: fixedNow})
	a := authority(t, s)
	create(t, a, "apr_1")
	before, _ := os.ReadFile(path)
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	if _, _, err := a.Create(t.Context(), newRequest(t, "apr_2")); err == nil {
		t.Fatal("Create succeeded in a read-only directory")
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("the failed write changed the file")
	}
	if _, err := s.RequestState(t.Context(), "apr_2"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("apr_2 after the failed write: %v", err)
	}
	if ev := create(t, a, "apr_2"); ev.Sequence != 2 {
		t.Fatalf("sequence after the failed write = %d, want 2", ev.Sequence)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
}
