package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-runtime/custos/asc"
)

// LimitsOptions bounds what the transport spends on a caller before any
// request is authenticated. Zero values disable each limit; NewLimits
// fills nothing in (the defaults live in the configuration).
type LimitsOptions struct {
	// PerSecond and Burst are each client address's token bucket: a
	// request takes a token, tokens refill at PerSecond up to Burst. An
	// IPv4 address is one client, an IPv6 address counts by its /64.
	// PerSecond 0 disables the limit.
	PerSecond float64
	Burst     int
	// Tracked is how many client addresses the buckets remember; past it
	// the least recently seen address is forgotten (it comes back with a
	// full bucket), so many source addresses cannot grow memory.
	Tracked int
	// Exempt are the addresses no per-address limit applies to (the
	// gateway's own host, a reverse proxy that limits on its side).
	Exempt []netip.Prefix
	// Connections caps the open connections of a Listener: past it
	// Accept waits (the kernel's backlog holds the caller) until one
	// closes. ConnectionsPerAddress caps one client address's; a
	// connection over it is closed at once. 0 disables each.
	Connections, ConnectionsPerAddress int
	// BodyBytes caps the bytes of request bodies in flight: a request
	// with a body reserves its Content-Length (MaxBody when unknown) from
	// it before its handler runs and returns them when the handler
	// returns. A request that finds no room waits up to BodyWait, then
	// gets 503 with Retry-After. 0 disables the cap.
	BodyBytes int64
	BodyWait  time.Duration
	// BodyBytesPerAddress caps the body bytes one client address holds
	// of BodyBytes, so that one address's slow bodies cannot take all of
	// it; past it the request gets 503 at once. 0 disables the cap.
	BodyBytesPerAddress int64
	// MaxBody is the largest body any handler behind reads: a longer
	// Content-Length is 413 before anything is read or reserved, and a
	// body of unknown length (chunked) reserves MaxBody and is cut there.
	// 0: no such limit here.
	MaxBody int64
	// BodyTimeout is how long a request's body may take to arrive once
	// its handler runs (408 from the inbox past it). 0 leaves only the
	// server's own ReadTimeout.
	BodyTimeout time.Duration
	// Logger receives a sampled line about refusals (at most one per
	// LogEvery, 1 minute when zero), never one per refusal; nil is silent.
	Logger   *slog.Logger
	LogEvery time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Refusal reasons, the reason label of custos_transport_refused_total.
const (
	ReasonRateLimited   = "rate_limited"
	ReasonTooManyBodies = "too_many_bodies"
	ReasonTooSlow       = "too_slow"
	ReasonTooLarge      = "too_large"
	ReasonConnections   = "connections"
	ReasonAborted       = "aborted"
)

var reasons = [...]string{ReasonRateLimited, ReasonTooManyBodies, ReasonTooSlow, ReasonTooLarge, ReasonConnections, ReasonAborted}

// Limits refuses, at the transport, what must be refused before it costs
// anything: a client address over its rate (429 before the body is read),
// bodies past the bytes in flight (503), connections past the cap. It
// counts every refusal for /metrics and logs them sampled. A nil *Limits
// refuses nothing and counts nothing.
type Limits struct {
	o        LimitsOptions
	rate     *addressBuckets
	bodies   *byteBudget
	heldMu   sync.Mutex
	held     map[netip.Addr]int64 // body bytes reserved per client key; only keys holding some
	refused  [len(reasons)]atomic.Int64
	conns    atomic.Int64
	waits    atomic.Int64
	lastLog  atomic.Int64
	sinceLog atomic.Int64
}

// NewLimits checks o and returns the limits it describes.
func NewLimits(o LimitsOptions) (*Limits, error) {
	switch {
	case o.PerSecond < 0 || o.Burst < 0 || o.Tracked < 0:
		return nil, errors.New("httpapi: negative per-address rate, burst or tracked addresses")
	case o.PerSecond > 0 && (o.Burst < 1 || o.Tracked < 1):
		return nil, errors.New("httpapi: a per-address rate needs a burst and a number of tracked addresses")
	case o.Connections < 0 || o.ConnectionsPerAddress < 0:
		return nil, errors.New("httpapi: negative connection cap")
	case o.BodyBytes < 0 || o.BodyWait < 0 || o.BodyTimeout < 0 || o.MaxBody < 0:
		return nil, errors.New("httpapi: negative body limit")
	case o.BodyBytes > 0 && o.MaxBody < 1:
		return nil, errors.New("httpapi: a cap on body bytes in flight needs MaxBody")
	case o.BodyBytes > 0 && o.MaxBody > o.BodyBytes:
		return nil, fmt.Errorf("httpapi: body bytes in flight (%d) below the largest body (%d): such a body could never be read", o.BodyBytes, o.MaxBody)
	case o.BodyBytesPerAddress < 0 || o.BodyBytesPerAddress > 0 && o.MaxBody > o.BodyBytesPerAddress:
		return nil, fmt.Errorf("httpapi: body bytes per address (%d) negative or below the largest body (%d)", o.BodyBytesPerAddress, o.MaxBody)
	}
	for _, p := range o.Exempt {
		if !p.IsValid() {
			return nil, errors.New("httpapi: invalid exempt prefix")
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LogEvery <= 0 {
		o.LogEvery = time.Minute
	}
	l := &Limits{o: o, held: map[netip.Addr]int64{}}
	if o.PerSecond > 0 {
		l.rate = newAddressBuckets(o.PerSecond, o.Burst, o.Tracked)
	}
	if o.BodyBytes > 0 {
		l.bodies = newByteBudget(o.BodyBytes)
	}
	return l, nil
}

// Handler applies the per-address rate, the cap on body bytes in flight
// and the body deadline to every request before next sees it.
func (l *Limits) Handler(next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, exempt := l.client(r.RemoteAddr)
		if l.rate != nil && !exempt {
			if ok, wait := l.rate.allow(addr, l.o.Now()); !ok {
				l.Refuse(ReasonRateLimited, addr)
				w.Header().Set("Retry-After", strconv.FormatInt(ceilSeconds(wait), 10))
				if r.ContentLength != 0 {
					// Closing spares net/http reading the unread body to
					// keep the connection.
					w.Header().Set("Connection", "close")
				}
				problem(w, asc.RateLimited, http.StatusTooManyRequests, "Too many requests from this address; retry after the time in Retry-After.")
				return
			}
		}
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		size := r.ContentLength
		if size < 0 {
			size = l.o.MaxBody
		}
		if l.o.MaxBody > 0 && size > l.o.MaxBody {
			// No handler behind would read it all: refused before a
			// byte is read or reserved.
			l.Refuse(ReasonTooLarge, addr)
			w.Header().Set("Connection", "close")
			problem(w, asc.InvalidRequest, http.StatusRequestEntityTooLarge,
				"The body is larger than "+strconv.FormatInt(l.o.MaxBody, 10)+" bytes.")
			return
		}
		if l.o.BodyBytesPerAddress > 0 && !exempt {
			if !l.hold(addr, size) {
				l.Refuse(ReasonTooManyBodies, addr)
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Connection", "close")
				problem(w, asc.RateLimited, http.StatusTooManyRequests, "This address has as many request bodies in flight as the gateway reads from one address; retry after the time in Retry-After.")
				return
			}
			defer l.hold(addr, -size)
		}
		if l.bodies != nil {
			if !l.bodies.acquire(r.Context(), size, l.o.BodyWait) {
				l.Refuse(ReasonTooManyBodies, addr)
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Connection", "close")
				problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "The gateway is reading as many requests as it can; retry after the time in Retry-After.")
				return
			}
			defer l.bodies.release(size)
		}
		if l.o.BodyTimeout > 0 {
			// Unsupported only on writers that are not a connection's
			// (tests' recorders); the server's ReadTimeout still holds.
			_ = http.NewResponseController(w).SetReadDeadline(l.o.Now().Add(l.o.BodyTimeout))
		}
		b := &limitedBody{rc: r.Body, l: l, addr: addr, left: -1}
		if r.ContentLength < 0 && l.o.MaxBody > 0 {
			b.left, b.limit = l.o.MaxBody, l.o.MaxBody
		}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// hold adds n (negative: returns) to the body bytes key holds; false,
// and nothing held, when that would pass BodyBytesPerAddress.
func (l *Limits) hold(key netip.Addr, n int64) bool {
	l.heldMu.Lock()
	defer l.heldMu.Unlock()
	v := l.held[key] + n
	if n > 0 && v > l.o.BodyBytesPerAddress {
		return false
	}
	if v <= 0 {
		delete(l.held, key)
	} else {
		l.held[key] = v
	}
	return true
}

// client is the key a request's remote address is limited under (the
// address, an IPv6 one cut to its /64) and whether it is exempt. An
// address that does not parse is limited under the zero key, which it
// shares with every other such address.
func (l *Limits) client(remote string) (key netip.Addr, exempt bool) {
	a, ok := remoteAddr(remote)
	if !ok {
		return netip.Addr{}, false
	}
	for _, p := range l.o.Exempt {
		if p.Contains(a) {
			return a, true
		}
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr(), false
	}
	return a, false
}

func remoteAddr(remote string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// Refuse counts a refusal for reason and logs it, sampled.
func (l *Limits) Refuse(reason string, addr netip.Addr) {
	if l == nil {
		return
	}
	for i, r := range reasons {
		if r == reason {
			l.refused[i].Add(1)
		}
	}
	l.sinceLog.Add(1)
	if l.o.Logger == nil {
		return
	}
	now := l.o.Now().UnixNano()
	last := l.lastLog.Load()
	if now-last < int64(l.o.LogEvery) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	// The address is the connection's, never a request-controlled string.
	l.o.Logger.Warn("transport refusals", "reason", reason, "addr", addr.String(),
		"since_last_line", l.sinceLog.Swap(0))
}

// refusedCount returns the count of reason (tests).
func (l *Limits) refusedCount(reason string) int64 {
	for i, r := range reasons {
		if r == reason {
			return l.refused[i].Load()
		}
	}
	return 0
}

var (
	descRefused  = prometheus.NewDesc("custos_transport_refused_total", "Requests and connections refused at the transport, before authentication.", []string{"reason"}, nil)
	descWaits    = prometheus.NewDesc("custos_transport_accept_waits_total", "Times a new connection waited because the connection cap was reached.", nil, nil)
	descConns    = prometheus.NewDesc("custos_transport_connections", "Open connections.", nil, nil)
	descInFlight = prometheus.NewDesc("custos_transport_body_bytes_in_flight", "Body bytes reserved by the requests being read or handled.", nil, nil)
	descTracked  = prometheus.NewDesc("custos_transport_addresses_tracked", "Client addresses the per-address rate limit remembers.", nil, nil)
)

// Describe and Collect make the transport's counters a Prometheus
// collector; a nil *Limits collects nothing.
func (l *Limits) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRefused, descWaits, descConns, descInFlight, descTracked} {
		ch <- d
	}
}

func (l *Limits) Collect(ch chan<- prometheus.Metric) {
	if l == nil {
		return
	}
	for i, r := range reasons {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(l.refused[i].Load()), r)
	}
	ch <- prometheus.MustNewConstMetric(descWaits, prometheus.CounterValue, float64(l.waits.Load()))
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(l.conns.Load()))
	var inFlight int64
	if l.bodies != nil {
		inFlight = l.bodies.inUse()
	}
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(inFlight))
	var tracked int
	if l.rate != nil {
		tracked = l.rate.len()
	}
	ch <- prometheus.MustNewConstMetric(descTracked, prometheus.GaugeValue, float64(tracked))
}

// ceilSeconds is d in whole seconds, rounded up, at least 1.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if time.Duration(s)*time.Second < d {
		s++
	}
	return max(s, 1)
}
