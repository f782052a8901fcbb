package ca

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestIssueVerifiesAgainstRoot(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "ca-key.pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi, err)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	is, err := c.Issue(context.Background(), "urn:arsia:agent:example", pub, Options{})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(is.ChainPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "urn:arsia:agent:example" {
		t.Fatalf("SAN URIs %v", leaf.URIs)
	}
	if got := is.NotAfter.Sub(is.NotBefore); got != DefaultValidity {
		t.Fatalf("validity %s", got)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.Root())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatal(err)
	}
	// Reopen loads the same root; another CA's root does not verify the leaf.
	c2, err := Open(dir, 0, 0)
	if err != nil || !c2.Root().Equal(c.Root()) {
		t.Fatalf("reopen: %v", err)
	}
	other, _ := Open(t.TempDir(), 0, 0)
	op := x509.NewCertPool()
	op.AddCert(other.Root())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: op, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Fatal("leaf verified against a foreign root")
	}
}

func TestIssueRefusals(t *testing.T) {
	if _, err := Open(t.TempDir(), 0, 30*24*time.Hour); err == nil {
		t.Fatal("default validity above max_validity accepted")
	}
	c, err := Open(t.TempDir(), 24*time.Hour, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name  string
		agent string
		pub   ed25519.PublicKey
		opts  Options
		want  error
	}{
		{"L3", "urn:a", pub, Options{TrustLevel: "L3"}, ErrQualifiedNotIssued},
		{"L9", "urn:a", pub, Options{TrustLevel: "L9"}, ErrBadRequest},
		{"short key", "urn:a", pub[:5], Options{}, ErrBadRequest},
		{"no agent", "", pub, Options{}, ErrBadRequest},
		{"not uri", "agent", pub, Options{}, ErrBadRequest},
		{"too long", "urn:a", pub, Options{Validity: 31 * 24 * time.Hour}, ErrBadRequest},
		{"negative", "urn:a", pub, Options{Validity: -time.Hour}, ErrBadRequest},
	} {
		if _, err := c.Issue(context.Background(), tc.agent, tc.pub, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v want %v", tc.name, err, tc.want)
		}
	}
}
