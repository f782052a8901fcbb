package sig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Defaults of HTTPJWKSOptions.
const (
	DefaultMaxAge             = time.Hour
	DefaultMaxMaxAge          = 24 * time.Hour
	DefaultMinRefreshInterval = 30 * time.Second
	DefaultHTTPTimeout        = 10 * time.Second
)

// HTTPJWKSOptions configures HTTPJWKS and Discovery. A nil *HTTPJWKSOptions
// and zero fields mean the defaults.
type HTTPJWKSOptions struct {
	// Client performs the requests. Nil means a client with a
	// DefaultHTTPTimeout timeout (not http.DefaultClient, which never
	// times out).
	Client *http.Client
	// Now is the clock for cache expiry and rate limiting; nil means
	// time.Now.
	Now func() time.Time
	// DefaultMaxAge is how long a key set stays fresh when the response has
	// no usable Cache-Control max-age. Zero means DefaultMaxAge (1 h).
	DefaultMaxAge time.Duration
	// MaxMaxAge caps a server's max-age, so that keys are refetched at
	// least this often whatever the server says. Zero means 24 h.
	MaxMaxAge time.Duration
	// MinRefreshInterval is the least time between two fetches, whatever
	// the reason (expiry, unknown kid, earlier failure). It is what stops
	// envelopes with made-up kids from turning the verifier into a load
	// generator against the key server. Zero means 30 s.
	MinRefreshInterval time.Duration
	// KidPrefix, when set, ignores every key whose kid does not start
	// with it. Discovery sets it to the agent id and "#", so an agent's
	// JWKS cannot vouch for another agent's kids.
	KidPrefix string
	// AllowHTTPInsecure permits http:// URLs. Without it only https:// is
	// fetched: keys read over plain HTTP prove nothing. For tests and
	// loopback deployments only.
	AllowHTTPInsecure bool
}

func (o *HTTPJWKSOptions) withDefaults() HTTPJWKSOptions {
	var out HTTPJWKSOptions
	if o != nil {
		out = *o
	}
	if out.Client == nil {
		out.Client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	// A copy of the client whose redirects obey the same URL rule, so that
	// an https URL cannot bounce the fetch to plain http.
	client := *out.Client
	next, allowHTTP := client.CheckRedirect, out.AllowHTTPInsecure
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" && !(req.URL.Scheme == "http" && allowHTTP) {
			return fmt.Errorf("redirect to %s URL refused", req.URL.Scheme)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	out.Client = &client
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.DefaultMaxAge <= 0 {
		out.DefaultMaxAge = DefaultMaxAge
	}
	if out.MaxMaxAge <= 0 {
		out.MaxMaxAge = DefaultMaxMaxAge
	}
	if out.MinRefreshInterval <= 0 {
		out.MinRefreshInterval = DefaultMinRefreshInterval
	}
	return out
}

// checkURL accepts an absolute https URL (or http with AllowHTTPInsecure)
// without user information.
func (o *HTTPJWKSOptions) checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: bad URL: %w", ErrKeySource, err)
	}
	if u.Host == "" || u.User != nil || !(u.Scheme == "https" || u.Scheme == "http" && o.AllowHTTPInsecure) {
		return nil, fmt.Errorf("%w: URL %q must be absolute https without user info", ErrKeySource, raw)
	}
	return u, nil
}

// HTTPJWKS is a KeySource that fetches a JWKS document over HTTP(S) and
// caches it (ARSIA-Identity key discovery and rotation):
//
//   - The set stays fresh for the response's Cache-Control max-age (default
//     1 h, at most MaxMaxAge; no-store and no-cache mean 0), then is
//     revalidated with If-None-Match when the server sent an ETag. A 304
//     keeps the set and restarts its freshness.
//   - An unknown kid triggers a refetch, so a newly published key works
//     at once; rotation works because old and new keys are both listed
//     during the overlap.
//   - No two fetches are closer than MinRefreshInterval (default 30 s);
//     within it an unknown kid is simply unknown.
//   - A kid that was in an earlier copy and is missing from a newer one is
//     revoked (ErrRevokedKey) for the life of the HTTPJWKS.
//   - Only status 200 (and 304 for a revalidation) is accepted, and bodies
//     are capped at MaxJWKSBytes. When a needed fetch fails the source fails
//     closed, including for a stale cached set, until a later fetch works.
//
// HTTPJWKS is safe for concurrent use; concurrent callers share one fetch.
type HTTPJWKS struct {
	url  string
	opts HTTPJWKSOptions
	lock chan struct{} // held while reading or updating the fields below

	history     keyHistory
	etag        string
	freshUntil  time.Time
	lastAttempt time.Time
	attempted   bool
	lastErr     error
}

// NewHTTPJWKS returns a source for the JWKS at rawURL. Nothing is fetched
// until the first Key or Refresh.
func NewHTTPJWKS(rawURL string, opts *HTTPJWKSOptions) (*HTTPJWKS, error) {
	o := opts.withDefaults()
	if _, err := o.checkURL(rawURL); err != nil {
		return nil, err
	}
	return &HTTPJWKS{url: rawURL, opts: o, lock: make(chan struct{}, 1)}, nil
}

// acquire takes the lock unless ctx ends first.
func (h *HTTPJWKS) acquire(ctx context.Context) error {
	select {
	case h.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrKeySource, ctx.Err())
	}
}

func (h *HTTPJWKS) release() { <-h.lock }

// Key returns the verification key named kid, fetching the set when it is
// missing or stale, or when kid is unknown and the rate limit allows.
func (h *HTTPJWKS) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.release()
	now := h.opts.Now()
	fetched, err := h.fresh(ctx, now)
	if err != nil {
		return nil, err
	}
	k, err := h.history.lookup(kid)
	if err != nil && isUnknown(err) && !fetched && h.mayFetch(now) {
		if ferr := h.fetch(ctx, now); ferr != nil {
			return nil, ferr
		}
		k, err = h.history.lookup(kid)
	}
	return k, err
}

// fresh fetches the set when it is missing or stale and the rate limit
// allows, and reports whether it fetched. It fails when there is no usable
// copy. The caller holds the lock.
func (h *HTTPJWKS) fresh(ctx context.Context, now time.Time) (bool, error) {
	if h.history.current != nil && now.Before(h.freshUntil) {
		return false, nil
	}
	switch {
	case h.mayFetch(now):
		return true, h.fetch(ctx, now)
	case h.lastErr != nil:
		return false, h.lastErr
	case h.history.current == nil:
		return false, fmt.Errorf("%w: no key set yet", ErrKeySource)
	}
	return false, nil
}

// Refresh fetches the set now, subject only to the context; it bypasses the
// minimum interval, so call it from an operator action, not per envelope.
func (h *HTTPJWKS) Refresh(ctx context.Context) error {
	if err := h.acquire(ctx); err != nil {
		return err
	}
	defer h.release()
	return h.fetch(ctx, h.opts.Now())
}

func (h *HTTPJWKS) mayFetch(now time.Time) bool {
	return !h.attempted || now.Sub(h.lastAttempt) >= h.opts.MinRefreshInterval
}

// fetch requests the set, revalidating with the ETag when there is one.
// A failure caused by the caller's own context is not remembered, so that
// one impatient caller cannot lock the others out for the whole interval.
func (h *HTTPJWKS) fetch(ctx context.Context, now time.Time) error {
	err := h.doFetch(ctx, now)
	if err != nil && ctx.Err() != nil {
		return err
	}
	h.attempted, h.lastAttempt, h.lastErr = true, now, err
	return err
}

func (h *HTTPJWKS) doFetch(ctx context.Context, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	revalidate := h.etag != "" && h.history.current != nil
	if revalidate {
		req.Header.Set("If-None-Match", h.etag)
	}
	resp, err := h.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: fetching JWKS: %w", ErrKeySource, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && revalidate:
		h.freshUntil = now.Add(h.maxAge(resp.Header))
		return nil
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: JWKS fetch returned status %d", ErrKeySource, resp.StatusCode)
	}
	body, err := readCapped(resp.Body, MaxJWKSBytes)
	if err != nil {
		return err
	}
	set, err := parseKeySet(body, h.opts.KidPrefix)
	if err != nil {
		return err
	}
	h.history.replace(set)
	h.etag = resp.Header.Get("ETag")
	h.freshUntil = now.Add(h.maxAge(resp.Header))
	return nil
}

// readCapped reads at most limit bytes and fails on more.
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading response: %w", ErrKeySource, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: response larger than %d bytes", ErrKeySource, limit)
	}
	return body, nil
}

// maxAge reads Cache-Control: max-age=N, no-store or no-cache (0), capped
// at MaxMaxAge. Absent or unparseable means DefaultMaxAge.
func (h *HTTPJWKS) maxAge(hdr http.Header) time.Duration {
	age, ok := parseMaxAge(hdr.Values("Cache-Control"))
	if !ok {
		age = h.opts.DefaultMaxAge
	}
	return min(age, h.opts.MaxMaxAge)
}

func parseMaxAge(values []string) (time.Duration, bool) {
	for _, v := range values {
		for _, directive := range strings.Split(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(directive), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				return 0, true
			case "max-age":
				n, err := strconv.ParseUint(strings.Trim(arg, `"`), 10, 32)
				if err != nil {
					return 0, false
				}
				return time.Duration(n) * time.Second, true
			}
		}
	}
	return 0, false
}
