package filestore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/aais"
)

func TestSequenceExhausted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	doc := fmt.Sprintf(`{"schema":"aais.store.v1","store_id":"a","sequence":%d,"compacted_through":%d}`, uint64(aais.MaxSequence), uint64(aais.MaxSequence))
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, nil)
	if _, _, err := authority(t, s).Create(t.Context(), newRequest(t, "apr_1")); !errors.Is(err, aais.ErrSequenceExhausted) {
		t.Fatalf("Create at MaxSequence: %v, want ErrSequenceExhausted", err)
	}
	if got, _ := os.ReadFile(path); string(got) != doc {
		t.Fatal("a refused write changed the file")
	}
}
