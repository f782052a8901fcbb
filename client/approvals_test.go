package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/client"
)

func testGatewayT(t *testing.T) *testGateway {
	t.Helper()
	g, err := startGateway()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// newApprovalRequest builds a request a process outside the gateway asks
// a human about.
func newApprovalRequest(t *testing.T, n int, run string) *aais.Request {
	t.Helper()
	now := time.Now()
	r, err := aais.NewRequest(aais.RequestParams{
		ID: fmt.Sprintf("apr_test_%d_%d", n, now.UnixNano()), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "test", SessionID: "s-1", RunID: run},
		Action: json.RawMessage(`{"kind":"process.exec","name":"shell.exec","summary":"Run check ` + strconv.Itoa(n) + `","arguments":{"command":"true"}}`),
		Risk:   aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Runs a process"}},
		Choices: []aais.Choice{{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApprovalsSubmitWaitDecideWithdraw(t *testing.T) {
	g := testGatewayT(t)
	a, err := client.NewApprovals(g.URL, g.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	me, err := a.Me(ctx)
	if err != nil || me.Actor.ID != "alice" {
		t.Fatalf("Me = %+v, %v", me, err)
	}

	req := newApprovalRequest(t, 1, "run-1")
	ev, err := a.Submit(ctx, req)
	if err != nil || ev.Type != aais.TypeRequested {
		t.Fatalf("Submit = %+v, %v", ev, err)
	}
	if again, err := a.Submit(ctx, req); err != nil || again.Type != aais.TypeRequested {
		t.Fatalf("Submit again = %+v, %v", again, err)
	}
	if st, err := a.Show(ctx, req.ID); err != nil || st.Type != aais.TypeRequested {
		t.Fatalf("Show = %+v, %v", st, err)
	}
	list, err := a.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != req.ID {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if p, err := a.Permission(ctx, req.ID); err != nil || !p.Decide || !p.Approve {
		t.Fatalf("Permission = %+v, %v", p, err)
	}

	waited := make(chan *aais.Message, 1)
	go func() {
		m, err := a.Wait(ctx, req.ID)
		if err != nil {
			t.Error(err)
		}
		waited <- m
	}()
	receipt, err := a.Decide(ctx, &list[0], client.Decision{Verdict: aais.Approve, Justification: "fine"})
	if err != nil || receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("Decide = %+v, %v", receipt, err)
	}
	if m := <-waited; m == nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("Wait = %+v", m)
	}
	// A second decision loses: a conflict receipt, and ErrConflict.
	if m, err := a.Decide(ctx, &list[0], client.Decision{Verdict: aais.Deny}); !errors.Is(err, client.ErrConflict) || m.Resolution.Outcome != aais.OutcomeConflict {
		t.Fatalf("second Decide = %+v, %v", m, err)
	}
	h, err := a.History(ctx, 10)
	if err != nil || len(h) != 1 || h[0].RequestID != req.ID || h[0].Justification != "fine" {
		t.Fatalf("History = %+v, %v", h, err)
	}

	// Withdrawn by its run.
	req2 := newApprovalRequest(t, 2, "run-2")
	if _, err := a.Submit(ctx, req2); err != nil {
		t.Fatal(err)
	}
	m, err := a.Withdraw(ctx, req2.ID)
	if err != nil || m.Resolution.Outcome != aais.OutcomeCancelled {
		t.Fatalf("Withdraw = %+v, %v", m, err)
	}

	// Refusals carry their ASC status.
	if _, err := a.Show(ctx, "apr_nope"); client.Status(err) == nil || client.Status(err).Code != asc.NotFound {
		t.Fatalf("Show of an unknown id: %v", err)
	}
	if _, err := a.History(ctx, 500); err == nil {
		t.Fatal("History limit 500: no error")
	}
	bad, _ := client.NewApprovals(g.URL, "wrong-token", nil)
	if _, err := bad.Me(ctx); client.Status(err) == nil || client.Status(err).HTTPStatus != http.StatusUnauthorized {
		t.Fatalf("Me with a wrong token: %v", err)
	}
}

// A bad token ends Watch at once: reconnecting would not change it.
func TestWatchRefusedToken(t *testing.T) {
	g := testGatewayT(t)
	a, _ := client.NewApprovals(g.URL, "wrong-token", nil)
	err := a.Watch(t.Context(), client.WatchOptions{}, func(client.Event) error { return nil })
	if e := client.Status(err); e == nil || e.Code != asc.AuthenticationRequired {
		t.Fatalf("Watch = %v", err)
	}
}

// A dropped stream is reopened after the last event delivered, with
// Last-Event-ID; nothing is missed or delivered twice.
func TestWatchResumes(t *testing.T) {
	g := testGatewayT(t)
	target, _ := url.Parse(g.URL)
	var mu sync.Mutex
	var lastIDs []string
	cut := make(chan struct{})
	var streams atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/approvals/events" {
			mu.Lock()
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			mu.Unlock()
			if streams.Add(1) == 1 {
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				go func() {
					select {
					case <-cut:
						cancel()
					case <-ctx.Done():
					}
				}()
				r = r.WithContext(ctx)
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	rp.ErrorLog = nil
	a, err := client.NewApprovals(proxy.URL, g.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := make(chan *aais.Message, 16)
	notices := make(chan client.NoticeKind, 16)
	done := make(chan error, 1)
	go func() {
		done <- a.Watch(ctx, client.WatchOptions{BackoffMin: time.Millisecond, Notify: func(n client.Notice) { notices <- n.Kind }},
			func(ev client.Event) error { events <- ev.Message; return nil })
	}()
	next := func(want aais.Type) *aais.Message {
		t.Helper()
		m := <-events
		if m.Type != want {
			t.Fatalf("event %s, want %s", m.Type, want)
		}
		return m
	}
	if snap := next(aais.TypeSnapshot); len(snap.Snapshot.Pending) != 0 {
		t.Fatalf("first snapshot: %+v", snap.Snapshot)
	}
	first := newApprovalRequest(t, 1, "")
	if _, err := a.Submit(ctx, first); err != nil {
		t.Fatal(err)
	}
	m1 := next(aais.TypeRequested)
	close(cut)
	if k := <-notices; k != client.NoticeLost {
		t.Fatalf("notice %d, want lost", k)
	}
	if k := <-notices; k != client.NoticeReconnected {
		t.Fatalf("notice %d, want reconnected", k)
	}
	second := newApprovalRequest(t, 2, "")
	if _, err := a.Submit(ctx, second); err != nil {
		t.Fatal(err)
	}
	if m := next(aais.TypeRequested); m.Request.ID != second.ID {
		t.Fatalf("after the reconnection: %s, want %s (and %s not again)", m.Request.ID, second.ID, first.ID)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) < 2 || lastIDs[0] != "" || lastIDs[1] != strconv.FormatUint(m1.Sequence, 10) {
		t.Fatalf("Last-Event-ID of the streams: %q, want \"\" then %d", lastIDs, m1.Sequence)
	}
}

// Events that skip a sequence number cannot continue the view: the watch
// takes a snapshot itself and delivers it as a resync.
func TestWatchResyncsMissedEvents(t *testing.T) {
	req := newApprovalRequest(t, 1, "")
	snap, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Stream: "custos", Sequence: 2}, &aais.Snapshot{AsOfSequence: 2})
	later, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Stream: "custos", Sequence: 7}, req)
	fresh, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Stream: "custos", Sequence: 7}, &aais.Snapshot{AsOfSequence: 7, Pending: []aais.Request{*req}})
	wire := func(m *aais.Message) string { b, _ := aais.Marshal(m); return string(b) }
	var snapshots atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/approvals/snapshot":
			snapshots.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, wire(fresh))
		case "/approvals/events":
			w.Header().Set("Content-Type", "text/event-stream")
			if r.Header.Get("Last-Event-ID") == "" {
				_, _ = io.WriteString(w, "id: 2\nevent: approval.snapshot\ndata: "+wire(snap)+"\n\n")
				_, _ = io.WriteString(w, "event: approval.requested\ndata: not json\n\n")
				_, _ = io.WriteString(w, "id: 7\nevent: approval.requested\ndata: "+wire(later)+"\n\n")
				return
			}
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	a, _ := client.NewApprovals(srv.URL, "t", nil)
	var kinds []client.NoticeKind
	var got []client.Event
	err := a.Watch(t.Context(), client.WatchOptions{BackoffMin: time.Millisecond, Notify: func(n client.Notice) { kinds = append(kinds, n.Kind) }},
		func(ev client.Event) error {
			got = append(got, ev)
			if ev.Resync {
				return client.ErrStopWatch
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Message.Type != aais.TypeSnapshot || !got[1].Resync || got[1].Message.Snapshot.AsOfSequence != 7 || snapshots.Load() != 1 {
		t.Fatalf("events %+v, %d snapshots taken", got, snapshots.Load())
	}
	if len(kinds) != 2 || kinds[0] != client.NoticeMalformed || kinds[1] != client.NoticeResync {
		t.Fatalf("notices %v", kinds)
	}
}

// A stream that goes silent (no event, no keepalive) is taken for dead and
// reopened.
func TestWatchIdleStreamIsReopened(t *testing.T) {
	var streams atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/approvals/events" {
			http.NotFound(w, r)
			return
		}
		streams.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never a byte more
	}))
	defer srv.Close()
	a, _ := client.NewApprovals(srv.URL, "t", nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var lost []error
	err := a.Watch(ctx, client.WatchOptions{Idle: 20 * time.Millisecond, BackoffMin: time.Millisecond,
		Notify: func(n client.Notice) {
			if n.Kind == client.NoticeLost {
				if lost = append(lost, n.Err); len(lost) == 2 {
					cancel()
				}
			}
		}}, func(client.Event) error { return nil })
	if !errors.Is(err, context.Canceled) || streams.Load() < 2 {
		t.Fatalf("Watch = %v after %d streams", err, streams.Load())
	}
	for _, e := range lost {
		if !strings.Contains(e.Error(), "nothing received") {
			t.Fatalf("lost because %v", e)
		}
	}
}

// Many agents' calls through one Sender at once: one discovery, every
// reply verified.
func TestSendConcurrently(t *testing.T) {
	g := testGatewayT(t)
	s, err := client.NewSender(g.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			res, err := s.Send(t.Context(), client.Call{To: g.URL, Capabilities: []string{"demo.echo"}, Type: "com.acme/echo",
				Args: map[string]any{"n": i}})
			if err == nil && string(res.Result) != fmt.Sprintf(`{"echo":{"n":%d}}`, i) {
				err = fmt.Errorf("call %d: result %s", i, res.Result)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// A caller that gives up while a call waits for approval gets its
// context's error, not a result.
func TestSendGivesUpWaiting(t *testing.T) {
	g := testGatewayT(t)
	s, _ := client.NewSender(g.Key, &client.SenderOptions{PollMin: time.Millisecond, PollMax: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	var polls atomic.Int32
	_, err := s.Send(ctx, client.Call{To: g.URL, Capabilities: []string{"billing.invoice.create"}, Type: "com.acme/invoice",
		Args: map[string]any{"amount": "1.00"}, Profile: "EU-AI-ACT-HIGH-RISK",
		OnPending: func(*client.Result) { polls.Add(1); cancel() }})
	if !errors.Is(err, context.Canceled) || polls.Load() != 1 {
		t.Fatalf("Send = %v (OnPending %d)", err, polls.Load())
	}
}
