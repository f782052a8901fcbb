package filestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/filestore"
)

func open(t testing.TB, path string, o *filestore.Options) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(path, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// kitOptions measures retention ages on a clock near the kit's, whose
// messages would otherwise look months old and be compacted away.
func kitOptions() *filestore.Options {
	return &filestore.Options{Now: func() time.Time { return aaistest.Start.Add(24 * time.Hour) }}
}

func TestConformance(t *testing.T) {
	aaistest.Run(t, aaistest.Backend{
		New: func(t *testing.T) aais.Store {
			return open(t, filepath.Join(t.TempDir(), "approvals.json"), kitOptions())
		},
		Reopen: func(t *testing.T, s aais.Store) aais.Store {
			return open(t, s.(*filestore.Store).Path(), kitOptions())
		},
	})
}
