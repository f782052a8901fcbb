package authserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
)

// MaxFormBytes bounds the body of a token, introspection or revocation
// request: an assertion, a token and a few names fit many times over.
const MaxFormBytes = 64 << 10

// Mounter is where Mount puts the endpoints (an *http.ServeMux, or the
// routes.Mux of custos serve).
type Mounter interface {
	Handle(pattern string, h http.Handler)
}

// Mount puts the four endpoints on m.
func (s *Server) Mount(m Mounter) {
	m.Handle("GET "+MetadataPath, http.HandlerFunc(s.metadata))
	m.Handle("POST "+TokenPath, http.HandlerFunc(s.token))
	m.Handle("POST "+IntrospectPath, http.HandlerFunc(s.introspect))
	m.Handle("POST "+RevokePath, http.HandlerFunc(s.revoke))
}

// Metadata is the RFC 8414 authorization server metadata.
func (s *Server) Metadata() map[string]any {
	md := map[string]any{
		"issuer":                                s.o.Issuer,
		"token_endpoint":                        s.o.Issuer + TokenPath,
		"introspection_endpoint":                s.o.Issuer + IntrospectPath,
		"revocation_endpoint":                   s.o.Issuer + RevokePath,
		"grant_types_supported":                 []string{"client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"private_key_jwt"},
		"token_endpoint_auth_signing_alg_values_supported":         []string{auth.EdDSA, auth.ES256},
		"introspection_endpoint_auth_methods_supported":            []string{"private_key_jwt"},
		"introspection_endpoint_auth_signing_alg_values_supported": []string{auth.EdDSA, auth.ES256},
		"revocation_endpoint_auth_methods_supported":               []string{"private_key_jwt"},
		"revocation_endpoint_auth_signing_alg_values_supported":    []string{auth.EdDSA, auth.ES256},
		"dpop_signing_alg_values_supported":                        []string{auth.EdDSA, auth.ES256},
		"response_types_supported":                                 []string{},
	}
	if s.o.JWKSURL != "" {
		md["jwks_uri"] = s.o.JWKSURL
	}
	return md
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "max-age=300")
	writeJSON(w, http.StatusOK, s.Metadata())
}

// ErrForm is returned by ParseForm.
var ErrForm = errors.New("authserver: malformed request")

// ParseForm reads an application/x-www-form-urlencoded body of at most
// MaxFormBytes. A parameter given twice is refused (RFC 6749 §3.2), and
// so is a query string: credentials do not belong in a URL.
func ParseForm(r *http.Request) (url.Values, error) {
	if r.URL.RawQuery != "" {
		return nil, fmt.Errorf("%w: parameters in the query string", ErrForm)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, fmt.Errorf("%w: Content-Type must be application/x-www-form-urlencoded", ErrForm)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxFormBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %w", ErrForm, err)
	}
	if len(body) > MaxFormBytes {
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrForm, MaxFormBytes)
	}
	return parseFormBody(string(body))
}

func parseFormBody(body string) (url.Values, error) {
	v, err := url.ParseQuery(body)
	if err != nil {
		return nil, fmt.Errorf("%w: not a form", ErrForm)
	}
	for name, vals := range v {
		if len(vals) > 1 {
			return nil, fmt.Errorf("%w: parameter %q given more than once", ErrForm, clip(name))
		}
	}
	return v, nil
}

// oauthError is an RFC 6749 §5.2 error response.
type oauthError struct {
	status int
	code   string
	desc   string
}

func (e *oauthError) Error() string { return e.code + ": " + e.desc }

func fail(status int, code, desc string) *oauthError {
	return &oauthError{status: status, code: code, desc: desc}
}

func (s *Server) writeError(w http.ResponseWriter, e *oauthError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_client"`)
	}
	writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authenticate checks the client assertion of a form (recording its jti
// once valid).
func (s *Server) authenticate(r *http.Request, form url.Values, now time.Time) (*auth.ClientAssertion, *oauthError) {
	typ, assertion := form.Get("client_assertion_type"), form.Get("client_assertion")
	if typ == "" && assertion == "" {
		return nil, fail(http.StatusUnauthorized, "invalid_client", "client authentication required: client_assertion_type "+auth.ClientAssertionType+" with a client_assertion")
	}
	if typ != auth.ClientAssertionType || assertion == "" {
		return nil, fail(http.StatusUnauthorized, "invalid_client", "client_assertion_type must be "+auth.ClientAssertionType+", with a client_assertion")
	}
	a, errs := auth.ValidateClientAssertion(r.Context(), assertion, auth.AssertionOptions{
		Now: now, Skew: s.o.Skew, Audiences: []string{s.TokenURL(), s.o.Issuer, s.o.Issuer + r.URL.Path},
		ClientID: form.Get("client_id"), Keys: s.o.SenderKeys(), Replay: s.o.Replay,
		Algorithms: []string{auth.EdDSA, auth.ES256},
	})
	if len(errs) > 0 {
		joined := errors.Join(errs...)
		if errors.Is(joined, auth.ErrReplayCache) || errors.Is(joined, auth.ErrReplayCacheFull) {
			s.log.Warn("replay set unavailable", "err", joined)
			return nil, fail(http.StatusServiceUnavailable, "temporarily_unavailable", "the request cannot be processed now; retry later")
		}
		s.log.Info("client assertion refused", "path", r.URL.Path, "err", joined)
		return nil, fail(http.StatusUnauthorized, "invalid_client", "the client assertion was not accepted")
	}
	return a, nil
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	t, e := s.tokenRequest(r)
	if e != nil {
		s.writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": t.AccessToken, "token_type": t.TokenType,
		"expires_in": int64(t.ExpiresAt.Sub(t.IssuedAt).Seconds()), "scope": strings.Join(t.Scope, " "),
	})
}

func (s *Server) tokenRequest(r *http.Request) (Token, *oauthError) {
	form, err := ParseForm(r)
	if err != nil {
		return Token{}, fail(http.StatusBadRequest, "invalid_request", strings.TrimPrefix(err.Error(), "authserver: "))
	}
	if gt := form.Get("grant_type"); gt != "client_credentials" {
		if gt == "" {
			return Token{}, fail(http.StatusBadRequest, "invalid_request", "grant_type is required")
		}
		return Token{}, fail(http.StatusBadRequest, "unsupported_grant_type", "only client_credentials is supported")
	}
	proofs := r.Header.Values("DPoP")
	if len(proofs) > 1 {
		return Token{}, fail(http.StatusBadRequest, "invalid_dpop_proof", "more than one DPoP header")
	}
	now := s.o.Now()
	// The client is authenticated first: a DPoP proof's jti is recorded
	// only for a request that passed.
	client, e := s.authenticate(r, form, now)
	if e != nil {
		return Token{}, e
	}
	if aud := form.Get("audience"); aud != "" && aud != s.o.Agent {
		return Token{}, fail(http.StatusBadRequest, "invalid_target", "this server issues tokens for "+s.o.Agent+" only")
	}
	scope := strings.Split(form.Get("scope"), " ")
	scope = slicesCompact(scope)
	if len(scope) == 0 {
		if scope = s.defaultScope(client.ClientID); len(scope) == 0 {
			return Token{}, fail(http.StatusBadRequest, "invalid_scope", "no capability is granted to "+client.ClientID)
		}
	}
	if err := s.checkScope(client.ClientID, scope); err != nil {
		return Token{}, fail(http.StatusBadRequest, "invalid_scope", strings.TrimPrefix(err.Error(), "authserver: "))
	}
	jkt := ""
	if len(proofs) == 1 {
		p, errs := auth.ValidateDPoP(r.Context(), proofs[0], auth.DPoPOptions{Method: http.MethodPost, URL: s.TokenURL(),
			Now: now, Skew: s.o.Skew, Replay: s.o.Replay, Algorithms: []string{auth.EdDSA, auth.ES256}, TokenRequest: true})
		if len(errs) > 0 {
			joined := errors.Join(errs...)
			if errors.Is(joined, auth.ErrReplayCache) || errors.Is(joined, auth.ErrReplayCacheFull) {
				return Token{}, fail(http.StatusServiceUnavailable, "temporarily_unavailable", "the request cannot be processed now; retry later")
			}
			s.log.Info("DPoP proof refused", "client", client.ClientID, "err", joined)
			return Token{}, fail(http.StatusBadRequest, "invalid_dpop_proof", "the DPoP proof was not accepted")
		}
		if jkt, err = auth.Thumbprint(p.JWK); err != nil {
			return Token{}, fail(http.StatusBadRequest, "invalid_dpop_proof", "the DPoP proof's key has no thumbprint")
		}
	}
	t, err := s.Issue(r.Context(), client.ClientID, scope, jkt, 0)
	if err != nil {
		if errors.Is(err, ErrScope) {
			return Token{}, fail(http.StatusBadRequest, "invalid_scope", strings.TrimPrefix(err.Error(), "authserver: "))
		}
		s.log.Error("issuing a token", "client", client.ClientID, "err", err)
		return Token{}, fail(http.StatusInternalServerError, "server_error", "the token could not be issued")
	}
	s.log.Info("token issued", "client", client.ClientID, "jti", t.ID, "type", t.TokenType, "scope", t.Scope)
	return t, nil
}

func slicesCompact(in []string) []string {
	var out []string
	for _, e := range in {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// ownToken verifies a token this server issued (any sub, its aud).
func (s *Server) ownToken(r *http.Request, token string, now time.Time) *auth.Claims {
	if token == "" || len(token) > auth.MaxJWTBytes {
		return nil
	}
	c, errs := auth.ValidateAccessToken(r.Context(), token, s.own, auth.TokenOptions{Now: now, Skew: s.o.Skew,
		Issuer: s.o.Issuer, ExpectedAudience: s.o.Agent, SkipSubjectCheckInsecure: true, Algorithms: []string{auth.EdDSA, auth.ES256, auth.RS256}})
	if len(errs) > 0 {
		return nil
	}
	return c
}

// introspect answers RFC 7662: active only for an unexpired, unrevoked
// token this server issued to the authenticated client itself, so that
// agents cannot probe each other's tokens.
func (s *Server) introspect(w http.ResponseWriter, r *http.Request) {
	form, err := ParseForm(r)
	if err != nil {
		s.writeError(w, fail(http.StatusBadRequest, "invalid_request", strings.TrimPrefix(err.Error(), "authserver: ")))
		return
	}
	now := s.o.Now()
	client, e := s.authenticate(r, form, now)
	if e != nil {
		s.writeError(w, e)
		return
	}
	c := s.ownToken(r, form.Get("token"), now)
	if c == nil || c.Subject != client.ClientID || now.After(time.Unix(c.ExpiresAt, 0)) {
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return
	}
	revoked, err := s.o.Replay.Contains(r.Context(), auth.RevokedTokenKey(c.ID))
	if err != nil {
		s.log.Warn("revocation list unavailable", "err", err)
		s.writeError(w, fail(http.StatusServiceUnavailable, "temporarily_unavailable", "the request cannot be processed now; retry later"))
		return
	}
	if revoked {
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return
	}
	out := map[string]any{"active": true, "iss": c.Issuer, "sub": c.Subject, "client_id": c.Subject,
		"aud": c.Audience, "exp": c.ExpiresAt, "iat": c.IssuedAt, "jti": c.ID, "scope": c.Scope, "token_type": "Bearer"}
	if c.SenderConstrained() {
		out["token_type"] = "DPoP"
		out["cnf"] = map[string]string{"jkt": c.Confirmation.JKT}
	}
	writeJSON(w, http.StatusOK, out)
}

// revoke answers RFC 7009: 200 whatever the token, and a token this
// server issued to the authenticated client is listed as revoked until
// it expires.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	form, err := ParseForm(r)
	if err != nil {
		s.writeError(w, fail(http.StatusBadRequest, "invalid_request", strings.TrimPrefix(err.Error(), "authserver: ")))
		return
	}
	now := s.o.Now()
	client, e := s.authenticate(r, form, now)
	if e != nil {
		s.writeError(w, e)
		return
	}
	if hint := form.Get("token_type_hint"); hint != "" && hint != "access_token" {
		s.writeError(w, fail(http.StatusBadRequest, "unsupported_token_type", "only access tokens are issued here"))
		return
	}
	c := s.ownToken(r, form.Get("token"), now)
	if c != nil && c.Subject == client.ClientID {
		until := time.Unix(c.ExpiresAt, 0).Add(s.o.Skew)
		if _, err := s.o.Replay.Seen(r.Context(), auth.RevokedTokenKey(c.ID), until); err != nil {
			s.log.Warn("recording a revocation", "err", err)
			s.writeError(w, fail(http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be revoked now; retry later"))
			return
		}
		s.log.Info("token revoked", "client", client.ClientID, "jti", c.ID)
		if s.o.OnRevoke != nil {
			if err := s.o.OnRevoke(r.Context(), client.ClientID, c.ID); err != nil {
				s.log.Error("auditing a revocation", "err", err)
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
