package httpapi

import (
	"errors"
	"net/http"

	"github.com/custos-runtime/custos/aais"
)

// ErrCSRF is what SessionAuth returns for a cookie-authenticated request
// that could change state without the session's CSRF token or an allowed
// Origin.
var ErrCSRF = errors.New("httpapi: missing or wrong CSRF token or origin")

// SessionAuth is an Authenticator for other reviewer endpoints (such as the
// review queue) that accepts both kinds of reviewer credentials: a bearer
// token (Bearer) when the request has an Authorization header, otherwise
// the browser session cookie, with the CSRF token and Origin checks of the
// approvals endpoints on every request that is not GET, HEAD or OPTIONS.
type SessionAuth struct {
	Bearer   Authenticator
	Sessions *Sessions
	// AllowedOrigins are browser origins allowed besides the server's own.
	AllowedOrigins []string
}

// Authenticate implements Authenticator.
func (s SessionAuth) Authenticate(r *http.Request) (aais.Actor, error) {
	if r.Header.Get("Authorization") != "" || s.Sessions == nil {
		if s.Bearer == nil {
			return aais.Actor{}, ErrUnauthenticated
		}
		return s.Bearer.Authenticate(r)
	}
	ss, ok := s.Sessions.lookup(r)
	if !ok {
		return aais.Actor{}, ErrUnauthenticated
	}
	if !safeMethod(r.Method) {
		origins := originPolicy{}
		for _, o := range s.AllowedOrigins {
			origins[o] = true
		}
		if !origins.allowed(r, true) || !ss.csrfOK(r) {
			return aais.Actor{}, errors.Join(ErrUnauthenticated, ErrCSRF)
		}
	}
	return ss.actor, nil
}
