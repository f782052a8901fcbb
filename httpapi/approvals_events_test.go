package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/sqlitestore"
)

// sseEvent is one event read from a stream.
type sseEvent struct {
	id, typ, data string
}

// readEvents reads SSE events from r onto out until r ends.
func readEvents(r io.Reader, out chan<- sseEvent) error {
	br := bufio.NewReader(r)
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.typ != "" {
				out <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// smallBuffers makes the first accepted connection's send buffer small
// (the slow client dials first), so that when that client stops reading
// the server's writes block after a few events rather than after
// megabytes; the other clients keep the default buffers.
type smallBuffers struct {
	net.Listener
	once *sync.Once
}

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		l.once.Do(func() { _ = tc.SetWriteBuffer(4096) })
	}
	return c, err
}

// Hundreds of SSE streams on one server, fed from a SQLite store that is
// only ever polled once an hour: every stream gets every event, in order
// (no silent loss, and the store's in-process notification wakes the
// reader); a client that stops reading is cut off with a reason once an
// event has waited too long for it, while the others get everything meanwhile; it resumes
// with Last-Event-ID and gets exactly the events it had not received.
func TestEventStreamsFanOut(t *testing.T) {
	const subscribers, events, maxDelay = 300, 120, 2 * time.Second
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "approvals.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := aaistest.NewClock(time.Now().UTC())
	a := aaistest.NewAuthority(t, s, c)
	toks, err := NewTokens(map[string]aais.Actor{TokenHash(token): {ID: "alice", Type: aais.ActorHuman}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewApprovals(ApprovalsOptions{Authority: a, Store: s, Auth: toks, Poll: time.Hour,
		Heartbeat: 50 * time.Millisecond, StreamMaxDelay: maxDelay, StreamWriteTimeout: time.Minute,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallBuffers{srv.Listener, new(sync.Once)}
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	t.Cleanup(client.CloseIdleConnections)
	open := func(lastID string) (chan sseEvent, *http.Response) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/approvals/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("events: %s", resp.Status)
		}
		ch := make(chan sseEvent, events+16)
		go func() {
			defer close(ch)
			defer resp.Body.Close()
			_ = readEvents(resp.Body, ch)
		}()
		return ch, resp
	}
	next := func(ch chan sseEvent, what string) sseEvent {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
			return ev
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing within 30 s", what)
		}
		panic("unreachable")
	}

	// The slow client speaks HTTP by hand, with a small receive buffer,
	// and stops reading after the snapshot.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /approvals/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token)
	slowR := bufio.NewReader(conn)
	resp, err := http.ReadResponse(slowR, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("slow client: %v %v", resp, err)
	}
	slow := make(chan sseEvent, events+16)
	slowRead := make(chan struct{})
	go func() {
		defer close(slow)
		// The snapshot first, then nothing until told.
		br := bufio.NewReader(resp.Body)
		line, _ := br.ReadString('\n')
		for line != "\n" && line != "" {
			line, _ = br.ReadString('\n')
		}
		slow <- sseEvent{typ: "ready"}
		<-slowRead
		_ = readEvents(br, slow)
	}()
	if ev := next(slow, "slow client"); ev.typ != "ready" {
		t.Fatalf("slow client: %v", ev)
	}

	streams := make([]chan sseEvent, subscribers)
	for i := range streams {
		streams[i], _ = open("")
		if ev := next(streams[i], "snapshot"); ev.typ != string(aais.TypeSnapshot) || ev.id != "0" {
			t.Fatalf("stream %d began with %+v", i, ev)
		}
	}
	for i := range events {
		r := aaistest.Request(t, c.Now(), strconv.Itoa(i+1))
		if _, _, err := a.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	// Every stream gets every event, in order, while the slow client
	// reads nothing: it holds nobody up.
	var wg sync.WaitGroup
	errs := make(chan error, subscribers)
	for i, ch := range streams {
		wg.Go(func() {
			for want := 1; want <= events; {
				select {
				case ev, ok := <-ch:
					if !ok {
						errs <- fmt.Errorf("stream %d ended at %d", i, want)
						return
					}
					if ev.typ != string(aais.TypeRequested) || ev.id != strconv.Itoa(want) {
						errs <- fmt.Errorf("stream %d: %s %s, want approval.requested %d", i, ev.typ, ev.id, want)
						return
					}
					want++
				case <-time.After(30 * time.Second):
					errs <- fmt.Errorf("stream %d: stuck before event %d", i, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// The slow client reads again: the events it was sent, in order,
	// then a cutoff naming the reason and the sequence to resume after,
	// then the end of the stream.
	time.Sleep(maxDelay + maxDelay/4) // its next event has waited too long
	close(slowRead)
	last := 0
	var cut sseEvent
	for ev := range slow {
		if ev.typ == "cutoff" {
			cut = ev
			continue
		}
		if cut.typ != "" {
			t.Fatalf("%s after the cutoff", ev.typ)
		}
		if ev.typ != string(aais.TypeRequested) || ev.id != strconv.Itoa(last+1) {
			t.Fatalf("slow client: %s %s after %d", ev.typ, ev.id, last)
		}
		last++
	}
	if cut.typ == "" {
		t.Fatalf("the slow client got %d events and no cutoff", last)
	}
	if !strings.Contains(cut.data, `"reason":"slow_consumer"`) || !strings.Contains(cut.data, fmt.Sprintf(`"resume_after":"%d"`, last)) {
		t.Fatalf("cutoff: %s (last event %d)", cut.data, last)
	}
	if last >= events {
		t.Fatalf("the slow client was sent all %d events", last)
	}
	// Resuming with Last-Event-ID delivers exactly the rest, no snapshot.
	rest, _ := open(strconv.Itoa(last))
	for want := last + 1; want <= events; want++ {
		ev := next(rest, "resumed stream")
		if ev.typ != string(aais.TypeRequested) || ev.id != strconv.Itoa(want) {
			t.Fatalf("resumed: %s %s, want approval.requested %d", ev.typ, ev.id, want)
		}
	}
}
