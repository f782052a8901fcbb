// Package gatewaytest holds what the tests of the gateway and of the
// packages plugged into it share to build a gateway.Gateway: keys, and the
// state a gateway keeps (an approval authority, an exchange store, an
// audit log), all in memory or in a test's temporary directory.
package gatewaytest

import (
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/store/memstore"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

// Signer returns a fresh Ed25519 signer and its private key.
func Signer(tb testing.TB) (sig.Signer, ed25519.PrivateKey) {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := sig.NewEd25519Signer(priv.Seed())
	if err != nil {
		tb.Fatal(err)
	}
	return s, priv
}

// State returns an authority on a memory store, an exchange store in a
// temporary directory (closed when the test ends) and an in-memory audit
// log.
func State(tb testing.TB) (*aais.Authority, *sqliteexchange.Store, *audit.Log) {
	tb.Helper()
	a, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	xs, err := sqliteexchange.Open(tb.Context(), filepath.Join(tb.TempDir(), "x.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = xs.Close() })
	return a, xs, audit.New(audit.NewMemory(), nil)
}
