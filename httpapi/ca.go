package httpapi

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/ca"
)

// Paths of the certificate authority API.
const (
	CARootPath         = "/v1/arsia/ca/root.pem"
	CACertificatesPath = "/v1/arsia/ca/certificates"
)

// Limits of the certificate authority API.
const (
	// MaxCABody bounds an issuance or revocation request.
	MaxCABody = 16 << 10
	// DefaultCAListLimit and MaxCAListLimit bound a listing page.
	DefaultCAListLimit = 50
	MaxCAListLimit     = 500
)

// ReasonQualifiedNotIssued is the reason of the refusal to issue L3.
const ReasonQualifiedNotIssued = "qualified_certificate_not_issued"

// CAOptions configures the certificate authority API.
type CAOptions struct {
	// CA signs the certificates; Registry records them (both required).
	CA       *ca.CA
	Registry ca.Registry
	// Auth authenticates operators (required); Operators returns the
	// reviewer ids allowed to issue, list and revoke, read on every
	// request (a reload may change them).
	Auth      Authenticator
	Operators func() []string
	// OnIssue and OnRevoke, when set, are told of every issuance and
	// revocation (the audit log).
	OnIssue  func(ctx context.Context, c ca.Certificate, by aais.Actor)
	OnRevoke func(ctx context.Context, c ca.Certificate, by aais.Actor)
	Logger   *slog.Logger
	// Now is the clock of revocations (time.Now when nil).
	Now func() time.Time
}

type caAPI struct {
	o CAOptions
}

// NewCA returns the certificate authority API: the root certificate for
// anyone (GET CARootPath), and for operators issuance (POST
// CACertificatesPath), listing, lookup and revocation (POST
// CACertificatesPath/{serial}/revoke). Level 3 (qualified) certificates
// are never issued: 403 with reason ReasonQualifiedNotIssued.
func NewCA(o CAOptions) (http.Handler, error) {
	if o.CA == nil || o.Registry == nil || o.Auth == nil || o.Operators == nil {
		return nil, errors.New("httpapi: NewCA needs a CA, a Registry, an Authenticator and Operators")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &caAPI{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CARootPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(o.CA.RootPEM())
	})
	mux.HandleFunc("POST "+CACertificatesPath, a.operator(a.issue))
	mux.HandleFunc("GET "+CACertificatesPath, a.operator(a.list))
	mux.HandleFunc("GET "+CACertificatesPath+"/{serial}", a.operator(a.get))
	mux.HandleFunc("POST "+CACertificatesPath+"/{serial}/revoke", a.operator(a.revoke))
	return mux, nil
}

// operator runs next for an authenticated operator only: 401 without
// credentials, 403 for a reviewer who is not an operator. Nothing is read
// or written before.
func (a *caAPI) operator(next func(http.ResponseWriter, *http.Request, aais.Actor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		actor, err := a.o.Auth.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="custos"`)
			problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Authenticate as a certificate authority operator (Authorization: Bearer TOKEN).")
			return
		}
		if !slices.Contains(a.o.Operators(), actor.ID) {
			problemExtra(w, asc.PermissionDenied, http.StatusForbidden, "Reviewer "+actor.ID+" is not a certificate authority operator.",
				map[string]any{"reason": "not_an_operator"})
			return
		}
		next(w, r, actor)
	}
}

// IssueRequest is the body of POST CACertificatesPath.
type IssueRequest struct {
	// AgentID is the agent the certificate names (SAN URI).
	AgentID string `json:"agent_id"`
	// PublicKey is the agent's Ed25519 signing key as a JWK whose kid
	// belongs to AgentID.
	PublicKey arsia.JWK `json:"public_key"`
	// TrustLevel is "L2" (the default); "L3" is refused.
	TrustLevel string `json:"trust_level,omitempty"`
	// ValiditySeconds is the certificate's lifetime (the CA's default
	// when zero, at most its max_validity).
	ValiditySeconds int64 `json:"validity_seconds,omitempty"`
}

// CertificateResponse is one certificate as the API answers it. Its
// certificate_chain is what the agent publishes in its identity record.
type CertificateResponse struct {
	Serial           string    `json:"serial"`
	AgentID          string    `json:"agent_id"`
	TrustLevel       string    `json:"trust_level"`
	NotBefore        time.Time `json:"not_before"`
	NotAfter         time.Time `json:"not_after"`
	CertificateChain []string  `json:"certificate_chain"`
	IssuedBy         string    `json:"issued_by"`
	Revoked          bool      `json:"revoked"`
	RevokedAt        string    `json:"revoked_at,omitempty"`
	RevokedBy        string    `json:"revoked_by,omitempty"`
	RevocationReason string    `json:"revocation_reason,omitempty"`
}

func certificateResponse(c ca.Certificate) CertificateResponse {
	out := CertificateResponse{Serial: c.Serial, AgentID: c.AgentID, TrustLevel: "L2", NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(),
		CertificateChain: splitPEM(c.ChainPEM), IssuedBy: c.IssuedBy, Revoked: c.Revoked(), RevokedBy: c.RevokedBy, RevocationReason: c.RevocationReason}
	if c.Revoked() {
		out.RevokedAt = c.RevokedAt.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// splitPEM splits a PEM bundle into one string per block.
func splitPEM(b []byte) []string {
	out := []string{}
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return out
		}
		out = append(out, string(pem.EncodeToMemory(blk)))
	}
}

// parseIssueRequest checks an issuance request completely before
// anything is signed. The key is an ARSIA JWKS entry (arsia.JWKFromMap);
// an "alg" member, which JOSE libraries add, is accepted when it is
// EdDSA.
func parseIssueRequest(body []byte) (IssueRequest, ed25519.PublicKey, error) {
	var raw struct {
		AgentID         string          `json:"agent_id"`
		PublicKey       json.RawMessage `json:"public_key"`
		TrustLevel      string          `json:"trust_level"`
		ValiditySeconds int64           `json:"validity_seconds"`
	}
	req := IssueRequest{}
	if err := decodeObject(body, &raw, "agent_id", "public_key", "trust_level", "validity_seconds"); err != nil {
		return req, nil, err
	}
	req.AgentID, req.TrustLevel, req.ValiditySeconds = raw.AgentID, raw.TrustLevel, raw.ValiditySeconds
	if !arsia.ValidAgentID(req.AgentID) {
		return req, nil, fmt.Errorf("agent_id %q is not an ARSIA agent id", req.AgentID)
	}
	switch req.TrustLevel {
	case "", "L2", "L3":
	default:
		return req, nil, fmt.Errorf("trust_level %q: only L2 is issued", req.TrustLevel)
	}
	if req.ValiditySeconds < 0 || req.ValiditySeconds > int64(ca.MaxValidity/time.Second) {
		return req, nil, fmt.Errorf("validity_seconds %d is out of range", req.ValiditySeconds)
	}
	var m map[string]any
	if err := json.Unmarshal(raw.PublicKey, &m); err != nil || m == nil {
		return req, nil, errors.New("public_key must be a JWK object")
	}
	if alg, ok := m["alg"]; ok {
		if alg != "EdDSA" {
			return req, nil, errors.New("public_key.alg must be EdDSA")
		}
		delete(m, "alg")
	}
	k, err := arsia.JWKFromMap(m)
	if err != nil {
		return req, nil, fmt.Errorf("public_key: %w", err)
	}
	req.PublicKey = k
	if a, _, ok := strings.Cut(k.Kid, "#"); !ok || a != req.AgentID {
		return req, nil, fmt.Errorf("public_key.kid %q does not belong to %s", k.Kid, req.AgentID)
	}
	if k.Kty != "OKP" || k.Crv != "Ed25519" || (k.Use != "" && k.Use != arsia.UseSignature) {
		return req, nil, errors.New("public_key must be an Ed25519 (OKP) signing key")
	}
	pub, err := k.PublicKey()
	if err != nil {
		return req, nil, fmt.Errorf("public_key: %w", err)
	}
	ek, ok := pub.(ed25519.PublicKey)
	if !ok {
		return req, nil, errors.New("public_key must be an Ed25519 (OKP) signing key")
	}
	return req, ek, nil
}

func (a *caAPI) issue(w http.ResponseWriter, r *http.Request, actor aais.Actor) {
	body, ok := readJSON(w, r, MaxCABody, "the issuance request")
	if !ok {
		return
	}
	req, pub, err := parseIssueRequest(body)
	if err != nil {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "Invalid issuance request: "+err.Error()+".")
		return
	}
	if req.TrustLevel == "L3" {
		problemExtra(w, asc.PermissionDenied, http.StatusForbidden,
			"This gateway's CA issues L2 certificates only. L3 requires a qualified certificate (QcStatements, ETSI EN 319 412-5) from a qualified trust service provider under eIDAS; anchor that provider's root in trust.qualified_ca_files instead.",
			map[string]any{"reason": ReasonQualifiedNotIssued, "requested": "L3", "issuable": []string{"L2"},
				"legal_basis": "eIDAS (Regulation (EU) No 910/2014) Art. 3(15), Art. 28: qualified certificates are issued by qualified trust service providers only"})
		return
	}
	is, err := a.o.CA.Issue(r.Context(), req.AgentID, pub, ca.Options{Validity: time.Duration(req.ValiditySeconds) * time.Second, TrustLevel: req.TrustLevel})
	if errors.Is(err, ca.ErrBadRequest) {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "Invalid issuance request: "+strings.TrimPrefix(err.Error(), "ca: bad request: ")+".")
		return
	}
	if err != nil {
		a.o.Logger.ErrorContext(r.Context(), "issuing a certificate", "agent", req.AgentID, "err", err)
		problem(w, asc.InternalError, http.StatusInternalServerError, "The certificate could not be issued.")
		return
	}
	c := ca.Certificate{Issued: is, IssuedBy: actor.ID}
	// Recorded before it is handed out: a certificate the registry does
	// not know is refused by the gateway's own trust check.
	if err := a.o.Registry.Record(r.Context(), c); err != nil {
		a.o.Logger.ErrorContext(r.Context(), "recording a certificate", "agent", req.AgentID, "err", err)
		problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "The certificate registry is unavailable; nothing was issued.")
		return
	}
	if a.o.OnIssue != nil {
		a.o.OnIssue(r.Context(), c, actor)
	}
	a.o.Logger.InfoContext(r.Context(), "certificate issued", "serial", c.Serial, "agent", c.AgentID, "by", actor.ID, "not_after", c.NotAfter)
	w.Header().Set("Location", CACertificatesPath+"/"+c.Serial)
	writeCAJSON(w, http.StatusCreated, certificateResponse(c))
}

func writeCAJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		problem(w, asc.InternalError, http.StatusInternalServerError, "The answer could not be encoded.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// CAListQuery is the checked query of GET CACertificatesPath.
type CAListQuery struct {
	AgentID, Before string
	Limit           int
}

// ParseCAListQuery checks the listing's query parameters: agent_id, before
// (a serial: the page after it) and limit; anything else is refused.
func ParseCAListQuery(q map[string][]string) (CAListQuery, error) {
	out := CAListQuery{Limit: DefaultCAListLimit}
	for k, vs := range q {
		if len(vs) != 1 {
			return out, fmt.Errorf("parameter %q must appear once", k)
		}
		v := vs[0]
		switch k {
		case "agent_id":
			if !arsia.ValidAgentID(v) {
				return out, fmt.Errorf("agent_id %q is not an ARSIA agent id", v)
			}
			out.AgentID = v
		case "before":
			if !ca.ValidSerial(v) {
				return out, fmt.Errorf("before %q is not a certificate serial", v)
			}
			out.Before = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxCAListLimit {
				return out, fmt.Errorf("limit must be 1 to %d", MaxCAListLimit)
			}
			out.Limit = n
		default:
			if !utf8.ValidString(k) || len(k) > 64 {
				return out, errors.New("unknown parameter")
			}
			return out, fmt.Errorf("unknown parameter %q", k)
		}
	}
	return out, nil
}

func (a *caAPI) list(w http.ResponseWriter, r *http.Request, _ aais.Actor) {
	q, err := ParseCAListQuery(r.URL.Query())
	if err != nil {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, err.Error()+".")
		return
	}
	cs, err := a.o.Registry.List(r.Context(), q.AgentID, q.Before, q.Limit+1)
	if errors.Is(err, ca.ErrNotFound) {
		problem(w, asc.NotFound, http.StatusNotFound, "No certificate has serial "+q.Before+".")
		return
	}
	if err != nil {
		problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "The certificate registry is unavailable.")
		return
	}
	page := struct {
		Certificates []CertificateResponse `json:"certificates"`
		Next         string                `json:"next,omitempty"`
	}{Certificates: []CertificateResponse{}}
	if len(cs) > q.Limit {
		cs = cs[:q.Limit]
		page.Next = cs[len(cs)-1].Serial
	}
	for _, c := range cs {
		page.Certificates = append(page.Certificates, certificateResponse(c))
	}
	writeCAJSON(w, http.StatusOK, page)
}

// lookup answers 400 or 404 itself when the serial is bad or unknown.
func (a *caAPI) lookup(w http.ResponseWriter, r *http.Request, get func(string) (ca.Certificate, error)) (ca.Certificate, bool) {
	serial := r.PathValue("serial")
	if !ca.ValidSerial(serial) {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "The serial must be lowercase hexadecimal without leading zeros.")
		return ca.Certificate{}, false
	}
	c, err := get(serial)
	switch {
	case errors.Is(err, ca.ErrNotFound):
		problem(w, asc.NotFound, http.StatusNotFound, "No certificate has serial "+serial+".")
		return c, false
	case err != nil:
		problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "The certificate registry is unavailable.")
		return c, false
	}
	return c, true
}

func (a *caAPI) get(w http.ResponseWriter, r *http.Request, _ aais.Actor) {
	if c, ok := a.lookup(w, r, func(s string) (ca.Certificate, error) { return a.o.Registry.Get(r.Context(), s) }); ok {
		writeCAJSON(w, http.StatusOK, certificateResponse(c))
	}
}

func (a *caAPI) revoke(w http.ResponseWriter, r *http.Request, actor aais.Actor) {
	body, ok := readJSON(w, r, MaxCABody, "the revocation")
	if !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decodeObject(body, &req, "reason"); err != nil || strings.TrimSpace(req.Reason) == "" || len(req.Reason) > ca.MaxReason {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, fmt.Sprintf("Send {\"reason\": \"…\"}: why the certificate is revoked, 1 to %d bytes.", ca.MaxReason))
		return
	}
	// Microseconds: the precision every registry keeps, so that the
	// answer tells whether this call is the one that revoked.
	at, wasRevoked := a.o.Now().UTC().Truncate(time.Microsecond), false
	c, ok := a.lookup(w, r, func(s string) (ca.Certificate, error) {
		if prev, err := a.o.Registry.Get(r.Context(), s); err == nil && prev.Revoked() {
			wasRevoked = true
			return prev, nil
		}
		return a.o.Registry.Revoke(r.Context(), s, at, actor.ID, req.Reason)
	})
	if !ok {
		return
	}
	if !wasRevoked && c.RevokedAt.Equal(at) && c.RevokedBy == actor.ID {
		if a.o.OnRevoke != nil {
			a.o.OnRevoke(r.Context(), c, actor)
		}
		a.o.Logger.InfoContext(r.Context(), "certificate revoked", "serial", c.Serial, "agent", c.AgentID, "by", actor.ID, "reason", req.Reason)
	}
	writeCAJSON(w, http.StatusOK, certificateResponse(c))
}
