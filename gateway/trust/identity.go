package trust

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/arsia/sig"
)

// peer is one discovered agent: its key source and its cached identity
// record.
type peer struct {
	agent, base string
	disc        *sig.Discovery
	client      *http.Client
	lock        chan struct{} // held while fetching or reading the fields below

	have        bool                     // a record (or its absence) was fetched
	rec         *identity.IdentityRecord // nil: the peer publishes none
	fetchedAt   time.Time
	lastErr     *arsia.Error
	lastAttempt time.Time
}

// record returns the peer's identity record, nil when it publishes none
// (404), fetching it when there is no fresh copy. A failed fetch is not
// retried before the minimum refresh interval, and fails closed: a stale
// copy is not used.
func (p *peer) record(ctx context.Context, s *Store) (*identity.IdentityRecord, *arsia.Error) {
	select {
	case p.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, unavailable(p.agent, "the request ended while waiting for its identity record", ctx.Err())
	}
	defer func() { <-p.lock }()
	now := s.now()
	if p.have && now.Sub(p.fetchedAt) < s.ttl && !now.Before(p.fetchedAt) {
		return p.rec, nil
	}
	if p.lastErr != nil && now.Sub(p.lastAttempt) < s.minRefresh && !now.Before(p.lastAttempt) {
		return nil, cloneError(p.lastErr)
	}
	rec, found, e := p.fetch(ctx, s)
	if e != nil {
		p.have, p.rec = false, nil
		if ctx.Err() == nil {
			p.lastErr, p.lastAttempt = cloneError(e), now
		}
		return nil, e
	}
	p.have, p.fetchedAt, p.lastErr = true, now, nil
	p.rec = nil
	if found {
		p.rec = rec
	}
	return p.rec, nil
}

// ForgetIdentity drops the identity record cached for agent (a
// discovered peer), so that the next trust decision about it fetches the
// record again: after the gateway's CA issued the agent a certificate, its
// new chain counts at once instead of after the identity TTL. It waits
// for a fetch in progress; an unknown agent is ignored.
func (s *Store) ForgetIdentity(agent string) {
	p, ok := s.peers[agent]
	if !ok {
		return
	}
	p.lock <- struct{}{}
	p.have, p.rec, p.lastErr = false, nil, nil
	<-p.lock
}

// fetch reads the identity record; found is false on 404.
func (p *peer) fetch(ctx context.Context, s *Store) (*identity.IdentityRecord, bool, *arsia.Error) {
	base, err := url.Parse(p.base)
	if err != nil {
		return nil, false, unavailable(p.agent, "its base URL is invalid", err)
	}
	where := base.JoinPath(identity.RecordPath).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return nil, false, unavailable(p.agent, "its identity URL is invalid", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, false, unavailable(p.agent, "fetching "+where+" failed", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, false, nil
	default:
		return nil, false, unavailable(p.agent, fmt.Sprintf("%s answered status %d", where, resp.StatusCode), nil)
	}
	body, err := readCapped(resp.Body, identity.MaxRecordBytes)
	if err != nil {
		return nil, false, unavailable(p.agent, "reading "+where+" failed", err)
	}
	if h := resp.Header.Values(identity.SignatureHeader); len(h) > 0 {
		if len(h) > 1 {
			return nil, false, certError(arsia.CodeCertificateInvalid, "the identity record has more than one "+identity.SignatureHeader+" header", nil)
		}
		if e := p.verifyRecordSignature(ctx, s, body, h[0]); e != nil {
			return nil, false, e
		}
	} else if s.requireSig {
		return nil, false, certError(arsia.CodeCertificateInvalid, "the identity record is not signed ("+identity.SignatureHeader+" header missing)", nil)
	}
	rec, err := identity.ParseIdentityRecord(body)
	if err != nil {
		return nil, false, certError(arsia.CodeCertificateInvalid, "the identity record is invalid", err)
	}
	return rec, true, nil
}

// verifyRecordSignature checks the X-ARSIA-Sig header against the Ed25519
// keys of the peer's JWKS. The kids are read from a fresh copy of the JWKS
// document, and each key is then resolved through the Store's key source
// (the peer's keys less those the receiver revoked), so a key the peer
// withdrew or the receiver revoked cannot sign.
func (p *peer) verifyRecordSignature(ctx context.Context, s *Store, body []byte, header string) *arsia.Error {
	signature, err := identity.ParseSignatureHeader(header)
	if err != nil {
		return certError(arsia.CodeCertificateInvalid, "the identity record signature is malformed", err)
	}
	meta, err := p.disc.Metadata(ctx)
	if err != nil {
		return unavailable(p.agent, "its metadata could not be read to check the identity record signature", err)
	}
	kids, err := p.jwksKids(ctx, meta.JWKS)
	if err != nil {
		return unavailable(p.agent, "its JWKS could not be read to check the identity record signature", err)
	}
	digest := sha256.Sum256(body)
	for _, kid := range kids {
		k, err := p.disc.Key(ctx, kid)
		if err != nil || s.revoked(k) != "" {
			continue
		}
		if pub, ok := k.Key.(ed25519.PublicKey); ok && len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, digest[:], signature) {
			return nil
		}
	}
	return certError(arsia.CodeCertificateInvalid, "the identity record signature does not verify with any key of the agent's JWKS", nil)
}

// jwksKids reads the kids of agent's JWKS document at jwksURL.
func (p *peer) jwksKids(ctx context.Context, jwksURL string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := readCapped(resp.Body, sig.MaxJWKSBytes)
	if err != nil {
		return nil, err
	}
	return KidsOf(body, p.agent)
}

// KidsOf lists the kids of a JWKS document that belong to agent (start
// with agent and "#"), in document order and without repeats.
func KidsOf(jwks []byte, agent string) ([]string, error) {
	var doc struct {
		Keys []struct {
			KID any `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &doc); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	var kids []string
	seen := map[string]bool{}
	for _, k := range doc.Keys {
		kid, _ := k.KID.(string)
		if label, ok := strings.CutPrefix(kid, agent+"#"); ok && label != "" && !seen[kid] {
			seen[kid] = true
			kids = append(kids, kid)
		}
	}
	return kids, nil
}

// cloneError copies e and its details, so that a remembered error handed
// to several callers is never shared (the gateway adds to Details).
func cloneError(e *arsia.Error) *arsia.Error {
	c := *e
	c.Details = maps.Clone(e.Details)
	return &c
}

// unavailable is the fail-closed answer when a peer's identity cannot be
// established now: service_unavailable (retryable), saying why.
func unavailable(agent, why string, cause error) *arsia.Error {
	err := fmt.Errorf("trust: identity of %s: %s", agent, why)
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return &arsia.Error{
		Code:        arsia.CodeServiceUnavailable,
		Description: "The identity of " + agent + " cannot be established now (" + why + "); retry later.",
		Details:     map[string]any{"reason": "identity_unavailable"},
		Err:         err,
	}
}

// readCapped reads at most limit bytes and fails on more.
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}
