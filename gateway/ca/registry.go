package ca

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/custos-runtime/custos/arsia/identity"
)

// ErrNotFound: the registry holds no certificate with that serial.
var ErrNotFound = errors.New("ca: no such certificate")

// ErrRegistry wraps every failure of a Registry's storage; a revocation
// check that meets it fails closed (the certificate's status is unknown).
var ErrRegistry = errors.New("ca: certificate registry unavailable")

// MaxReason bounds a revocation reason, in bytes.
const MaxReason = 500

// Certificate is one issued certificate as the registry keeps it.
type Certificate struct {
	Issued
	// IssuedBy is the operator (reviewer id) who asked for it.
	IssuedBy string
	// RevokedAt is when it was revoked; zero while it is valid.
	RevokedAt time.Time
	// RevokedBy and RevocationReason say who revoked it and why.
	RevokedBy        string
	RevocationReason string
}

// Revoked reports whether c has been revoked.
func (c Certificate) Revoked() bool { return !c.RevokedAt.IsZero() }

// Registry is the durable record of what a CA issued and revoked, shared by
// every replica of a deployment (package store opens one on SQLite or
// PostgreSQL). Implementations are safe for concurrent use.
type Registry interface {
	// Record stores a newly issued certificate; a serial already stored
	// is an error.
	Record(ctx context.Context, c Certificate) error
	// Get returns the certificate with serial (ErrNotFound when absent).
	Get(ctx context.Context, serial string) (Certificate, error)
	// Revoke marks serial revoked at at, by by, for reason, and returns
	// the certificate. Revoking a revoked certificate changes nothing and
	// returns it as first revoked. ErrNotFound when absent.
	Revoke(ctx context.Context, serial string, at time.Time, by, reason string) (Certificate, error)
	// List returns up to limit certificates, newest first, of agentID
	// (every agent when empty), issued before the certificate with serial
	// before (from the newest when empty).
	List(ctx context.Context, agentID, before string, limit int) ([]Certificate, error)
}

// Serial is the registry's form of a certificate serial number: lowercase
// hexadecimal without leading zeros (big.Int.Text(16)).
func Serial(n *big.Int) string { return n.Text(16) }

// ValidSerial reports whether s is a serial in the registry's form of at
// most 40 hex digits (RFC 5280 caps serials at 20 octets).
func ValidSerial(s string) bool {
	if s == "" || len(s) > 40 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// RevocationChecker returns the check identity.VerifyOptions.CheckRevocation
// runs on a verified chain (leaf first): a leaf this CA signed must be in reg
// and not revoked. A leaf this CA signed that reg does not know is refused
// too (it was not issued through the registry: a key copied elsewhere, or a
// registry reset). Chains of other CAs are not this check's business. A
// registry failure fails closed.
func (c *CA) RevocationChecker(reg Registry) func(chain []*x509.Certificate) error {
	return func(chain []*x509.Certificate) error {
		if len(chain) < 2 {
			return nil
		}
		// The chain is verified: it leads to this CA when its root is
		// this CA's (which signs leaves only: path length 0).
		leaf := chain[0]
		if !chain[len(chain)-1].Equal(c.root) {
			return nil
		}
		// The verification path is bounded by its caller's context; the
		// lookup by a short timeout of its own.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := reg.Get(ctx, Serial(leaf.SerialNumber))
		switch {
		case errors.Is(err, ErrNotFound):
			return fmt.Errorf("%w: serial %s was not issued through this gateway's registry", identity.ErrCertificateRevoked, Serial(leaf.SerialNumber))
		case err != nil:
			return err
		case !bytes.Contains(got.ChainPEM, pemOf(leaf)):
			return fmt.Errorf("%w: serial %s is registered for another certificate", identity.ErrCertificateRevoked, got.Serial)
		case got.Revoked():
			return fmt.Errorf("%w: serial %s revoked at %s: %s", identity.ErrCertificateRevoked, got.Serial,
				got.RevokedAt.UTC().Format(time.RFC3339), got.RevocationReason)
		}
		return nil
	}
}
