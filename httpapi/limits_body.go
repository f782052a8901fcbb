package httpapi

import (
	"container/list"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/custos-runtime/custos/asc"
)

// byteBudget is a weighted semaphore over bytes, granted first come first
// served: a large body waiting is not overtaken forever by small ones.
type byteBudget struct {
	size int64

	mu      sync.Mutex
	used    int64
	waiters list.List // of *budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newByteBudget(size int64) *byteBudget { return &byteBudget{size: size} }

// acquire reserves n bytes (n <= size), waiting up to wait for them; false
// when they did not come in time or ctx ended.
func (b *byteBudget) acquire(ctx context.Context, n int64, wait time.Duration) bool {
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return true
	}
	if wait <= 0 {
		b.mu.Unlock()
		return false
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while giving up: keep it, the caller releases it.
		return true
	default:
	}
	front := b.waiters.Front() == e
	b.waiters.Remove(e)
	if front {
		// Those behind may fit now that the head no longer waits.
		b.grant()
	}
	return false
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grant()
}

// grant hands the free bytes to the waiters in order, stopping at the
// first that does not fit. b.mu is held.
func (b *byteBudget) grant() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*budgetWaiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}

func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// limitedBody is a request body under the transport's limits: a body of
// unknown length stops at what it reserved (a Content-Length body cannot
// pass its length: net/http stops it), and a read past the body deadline
// is counted too slow. Once the body reaches its end, net/http clears the
// read deadline as it starts watching the connection for the client going
// away, so a long handler is not cut off by the body's deadline.
type limitedBody struct {
	rc   io.ReadCloser
	l    *Limits
	addr netip.Addr
	// left is how much more may be read (-1: no limit here), limit what
	// was reserved.
	left, limit int64
	err         error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left >= 0 && int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if b.left >= 0 && int64(n) > b.left {
		n, err = int(b.left), &http.MaxBytesError{Limit: b.limit}
	}
	if b.left >= 0 {
		b.left -= int64(n)
	}
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case isTimeout(err):
		b.err = err
		b.l.Refuse(ReasonTooSlow, b.addr)
	default:
		b.err = err
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// readInboxBody reads a request body of at most max bytes. ok is false
// when it has answered: 413 for a body over max (refused from its
// Content-Length before a byte is read), 408 for one that did not arrive
// before the read deadline, 400 for one cut short or malformed (the
// client is usually gone; a connection that is not gets a precise
// answer instead of net/http's empty 200). A body of known length is read
// into one buffer of that size, never grown.
func readInboxBody(w http.ResponseWriter, r *http.Request, max int64, l *Limits) (body []byte, ok bool) {
	tooLarge := func() {
		l.Refuse(ReasonTooLarge, l.key(r.RemoteAddr))
		w.Header().Set("Connection", "close")
		problem(w, asc.InvalidRequest, http.StatusRequestEntityTooLarge,
			"The message is larger than "+strconv.FormatInt(max, 10)+" bytes, the most this gateway accepts.")
	}
	if r.ContentLength > max {
		tooLarge()
		return nil, false
	}
	var err error
	if r.ContentLength >= 0 {
		body = make([]byte, r.ContentLength)
		if _, err = io.ReadFull(r.Body, body); err == nil {
			// Reach the end, so that net/http (and the limits) know the
			// body is done.
			var one [1]byte
			if n, rerr := r.Body.Read(one[:]); n > 0 {
				err = errors.New("httpapi: body longer than its Content-Length")
			} else if !errors.Is(rerr, io.EOF) {
				err = rerr
			}
		}
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	}
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return body, true
	case errors.As(err, &mbe):
		tooLarge()
	case isTimeout(err):
		if _, counted := r.Body.(*limitedBody); !counted {
			l.Refuse(ReasonTooSlow, l.key(r.RemoteAddr))
		}
		w.Header().Set("Connection", "close")
		problem(w, asc.Timeout, http.StatusRequestTimeout, "The message did not arrive in time.")
	default:
		l.Refuse(ReasonAborted, l.key(r.RemoteAddr))
		w.Header().Set("Connection", "close")
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "The message was cut short or its transfer encoding is malformed.")
	}
	return nil, false
}

// key is the client key of a remote address (nil-safe).
func (l *Limits) key(remote string) netip.Addr {
	if l == nil {
		return netip.Addr{}
	}
	k, _ := l.client(remote)
	return k
}
