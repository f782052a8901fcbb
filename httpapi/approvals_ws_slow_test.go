package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

// A WebSocket client that stops reading is closed with 1013 and the
// reason slow_consumer once an event has waited too long for it, after
// the events it was sent, in order; the other clients get every event
// meanwhile.
func TestWebSocketSlowConsumer(t *testing.T) {
	// maxDelay leaves the fast clients room on a loaded machine (-race, two
	// cores): only the client that stops reading may fall that far behind.
	const clients, events, maxDelay = 20, 150, 3 * time.Second
	s := memstore.New()
	c := aaistest.NewClock(time.Now().UTC())
	a := aaistest.NewAuthority(t, s, c)
	toks, err := NewTokens(map[string]aais.Actor{TokenHash(token): {ID: "alice", Type: aais.ActorHuman}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewApprovals(ApprovalsOptions{Authority: a, Store: s, Auth: toks, Poll: 5 * time.Millisecond,
		Heartbeat: time.Minute, StreamMaxDelay: maxDelay, StreamWriteTimeout: time.Minute,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallBuffers{srv.Listener, new(sync.Once)}
	srv.Start()
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/approvals/ws"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dial := func(small bool) *websocket.Conn {
		t.Helper()
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := conn.(*net.TCPConn); ok && small {
				_ = tc.SetReadBuffer(4096)
			}
			return conn, err
		}}
		ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr},
			HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(1 << 20)
		t.Cleanup(func() { _ = ws.CloseNow() })
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := aais.Parse(b); err != nil || m.Type != aais.TypeSnapshot {
			t.Fatalf("first frame: %s %v", b, err)
		}
		return ws
	}
	slow := dial(true)
	fast := make([]*websocket.Conn, clients)
	for i := range fast {
		fast[i] = dial(false)
	}
	// The fast clients read as the events are created.
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, ws := range fast {
		wg.Go(func() {
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
			defer rcancel()
			for want := uint64(1); want <= events; want++ {
				_, b, err := ws.Read(rctx)
				if err != nil {
					errs <- fmt.Errorf("client %d before event %d: %w", i, want, err)
					return
				}
				if m, err := aais.Parse(b); err != nil || m.Type != aais.TypeRequested || m.Sequence != want {
					errs <- fmt.Errorf("client %d: %s, want event %d", i, b, want)
					return
				}
			}
		})
	}
	for i := range events {
		if _, _, err := a.Create(t.Context(), aaistest.Request(t, c.Now(), strconv.Itoa(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	time.Sleep(maxDelay + maxDelay/4) // the slow client's next event waits too long
	var last uint64
	for {
		_, b, err := slow.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "slow_consumer") {
				t.Fatalf("slow client after event %d: %v, want a 1013 slow_consumer close", last, err)
			}
			break
		}
		m, err := aais.Parse(b)
		if err != nil || m.Type != aais.TypeRequested || m.Sequence != last+1 {
			t.Fatalf("slow client: %s after event %d", b, last)
		}
		last = m.Sequence
	}
	if last >= events {
		t.Fatalf("the slow client was sent all %d events", last)
	}
}
