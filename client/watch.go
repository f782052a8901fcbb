package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// WatchOptions configures Approvals.Watch. The zero value is usable.
type WatchOptions struct {
	// Snapshot, when set, is where the watch starts: the stream continues
	// after its sequence. Nil starts with a fresh snapshot from the
	// server, delivered as the first event.
	Snapshot *aais.Message
	// BackoffMin and BackoffMax bound the wait before reopening a dropped
	// stream, doubling in between (500 ms and 30 s when zero).
	BackoffMin, BackoffMax time.Duration
	// Idle is how long the stream may stay silent before it is taken for
	// dead and reopened (45 s when zero; the server sends a keepalive
	// every 15 s).
	Idle time.Duration
	// Notify, when set, hears what happens to the connection. It is called
	// from Watch's goroutine and should return quickly.
	Notify func(Notice)
}

// NoticeKind is what a Notice reports.
type NoticeKind int

// Notices of a watch.
const (
	// NoticeLost: the stream dropped (Err says why) and is reopened in
	// RetryIn.
	NoticeLost NoticeKind = iota + 1
	// NoticeReconnected: a reopened stream was accepted.
	NoticeReconnected
	// NoticeGap: the server could not continue from Sequence (its store
	// was reset or compacted); a fresh snapshot follows on the stream.
	NoticeGap
	// NoticeResync: events were missed (Err says how); the watch takes a
	// fresh snapshot from the server and delivers it.
	NoticeResync
	// NoticeSnapshotFailed: that snapshot could not be taken (Err).
	NoticeSnapshotFailed
	// NoticeMalformed: an event could not be decoded and was skipped
	// (Event names its type, Err the problem).
	NoticeMalformed
	// NoticeCutoff: the server ended the stream (a consumer too slow);
	// the watch resumes from where it was.
	NoticeCutoff
)

// Notice is one thing that happened to a watch's connection.
type Notice struct {
	Kind     NoticeKind
	Err      error
	RetryIn  time.Duration
	Sequence uint64
	Event    string
}

// Event is one message of the approval stream, in order: an
// approval.snapshot (the first one, after a gap, or taken after missed
// events: Resync), approval.requested or approval.resolved, or another
// AAIS message the server sends on the stream. Events at or before the
// watch's position are not delivered again after a reconnection.
type Event struct {
	Message *aais.Message
	// Resync is set on a snapshot the watch took itself because events
	// were missed: it replaces everything known before.
	Resync bool
}

// ErrStopWatch, returned by a Watch callback, ends the watch without error.
var ErrStopWatch = errors.New("client: stop watching")

// Watch follows the approval event stream (GET /approvals/events, server-
// sent events) and calls fn with every event in order until ctx ends or fn
// returns an error. A dropped or silent stream is reopened with backoff
// and resumed with Last-Event-ID, so nothing is missed or repeated; when
// the server cannot continue (a gap) its fresh snapshot is delivered, and
// when events were missed anyway the watch takes a snapshot itself
// (Event.Resync). It returns ctx's error, fn's error (nil for
// ErrStopWatch), or a connection's refusal that reconnecting would not
// change (an *Error with a 4xx status, such as 401 for a token the server
// does not accept, or no longer: the login token of a restarted custos
// serve).
func (a *Approvals) Watch(ctx context.Context, o WatchOptions, fn func(Event) error) error {
	if o.BackoffMin <= 0 {
		o.BackoffMin = 500 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(30*time.Second, o.BackoffMin)
	}
	if o.Idle <= 0 {
		o.Idle = 45 * time.Second
	}
	if o.Notify == nil {
		o.Notify = func(Notice) {}
	}
	w := &watch{a: a, o: o, fn: fn}
	if o.Snapshot != nil {
		if err := w.view.Restore(o.Snapshot); err != nil {
			return fmt.Errorf("client: the starting snapshot: %w", err)
		}
		w.started = true
	}
	err := w.run(ctx)
	if errors.Is(err, ErrStopWatch) {
		return nil
	}
	return err
}

type watch struct {
	a  *Approvals
	o  WatchOptions
	fn func(Event) error
	// view is the watch's own copy of the queue: it says where the
	// stream is and whether an event continues it.
	view    aais.View
	started bool // the view holds a snapshot
}

// errCallback wraps an error of the callback, which ends the watch.
type errCallback struct{ err error }

func (e errCallback) Error() string { return e.err.Error() }

// errMissed: the stream cannot be continued from the view's position.
var errMissed = errors.New("events were missed")

func (w *watch) run(ctx context.Context) error {
	backoff := w.o.BackoffMin
	lost := false
	for {
		connected, err := w.once(ctx, lost)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var cb errCallback
		if errors.As(err, &cb) {
			return cb.err
		}
		if connected {
			lost, backoff = false, w.o.BackoffMin
		} else if e := Status(err); e != nil && e.HTTPStatus >= 400 && e.HTTPStatus < 500 &&
			e.HTTPStatus != http.StatusRequestTimeout && e.HTTPStatus != http.StatusTooManyRequests {
			// The server refuses this client (a token it no longer
			// accepts, say): retrying would not change it.
			return err
		}
		if errors.Is(err, errMissed) {
			w.o.Notify(Notice{Kind: NoticeResync, Err: err, Sequence: w.view.Sequence()})
			err = w.resync(ctx)
			if err == nil {
				continue
			}
			if errors.As(err, &cb) {
				return cb.err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.o.Notify(Notice{Kind: NoticeSnapshotFailed, Err: err})
		}
		if err == nil {
			err = errors.New("the server closed it")
		}
		w.o.Notify(Notice{Kind: NoticeLost, Err: err, RetryIn: backoff})
		lost = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, w.o.BackoffMax)
	}
}

// resync replaces the view from a fresh snapshot and delivers it.
func (w *watch) resync(ctx context.Context) error {
	snap, err := w.a.Snapshot(ctx)
	if err != nil {
		return err
	}
	if err := w.view.Restore(snap); err != nil {
		return err
	}
	w.started = true
	if err := w.fn(Event{Message: snap, Resync: true}); err != nil {
		return errCallback{err}
	}
	return nil
}

// once reads one connection of the stream. connected says whether the
// server accepted it.
func (w *watch) once(ctx context.Context, reconnecting bool) (connected bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := w.a.request(ctx, http.MethodGet, "/approvals/events", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if w.started {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(w.view.Sequence(), 10))
	}
	errIdle := fmt.Errorf("nothing received for %s", w.o.Idle)
	watchdog := time.AfterFunc(w.o.Idle, func() { cancel(errIdle) })
	defer watchdog.Stop()
	resp, err := w.a.http.Do(req)
	if err != nil {
		if c := context.Cause(ctx); c == errIdle {
			return false, c
		}
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
		return false, problemError(resp.StatusCode, data)
	}
	if reconnecting {
		w.o.Notify(Notice{Kind: NoticeReconnected, Sequence: w.view.Sequence()})
	}
	r := newSSEReader(resp.Body, func() { watchdog.Reset(w.o.Idle) })
	for {
		ev, err := r.next()
		if err != nil {
			if c := context.Cause(ctx); c == errIdle {
				err = c
			} else if errors.Is(err, io.EOF) {
				err = nil
			}
			return true, err
		}
		if err := w.dispatch(ev); err != nil {
			return true, err
		}
	}
}

// dispatch handles one server-sent event.
func (w *watch) dispatch(ev sseEvent) error {
	switch ev.event {
	case "gap":
		w.o.Notify(Notice{Kind: NoticeGap, Sequence: w.view.Sequence()})
		return nil
	case "cutoff":
		w.o.Notify(Notice{Kind: NoticeCutoff, Sequence: w.view.Sequence(), Err: errors.New(oneLine(ev.data, 200))})
		return nil
	}
	if ev.data == "" {
		return nil
	}
	m, err := aais.Parse([]byte(ev.data))
	if err != nil {
		w.o.Notify(Notice{Kind: NoticeMalformed, Event: ev.event, Err: err})
		return nil
	}
	switch m.Type {
	case aais.TypeSnapshot:
		if err := w.view.Restore(m); err != nil {
			return fmt.Errorf("%w (%v)", errMissed, err)
		}
		w.started = true
	case aais.TypeRequested, aais.TypeResolved:
		if !w.started {
			return fmt.Errorf("%w (an event before any snapshot)", errMissed)
		}
		applied, err := w.view.Apply(m)
		if err != nil {
			return fmt.Errorf("%w (%v)", errMissed, err)
		}
		if !applied {
			return nil // delivered already, or covered by the snapshot
		}
	}
	if err := w.fn(Event{Message: m}); err != nil {
		return errCallback{err}
	}
	return nil
}

// ---- server-sent events ----

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	id, event, data string
}

// sseReader reads the text/event-stream format (the WHATWG HTML
// "server-sent events" parsing rules): lines end with CRLF, LF or CR; a
// line starting with a colon is a comment; "field: value" sets a field
// (one leading space of the value dropped); data lines are joined with
// LF; a blank line dispatches the event, unless it has no data.
type sseReader struct {
	sc     *bufio.Scanner
	onLine func()
}

// maxSSELine caps one line: an AAIS message and its field name.
const maxSSELine = aais.DefaultMaxSize + 4096

func newSSEReader(r io.Reader, onLine func()) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	sc.Split(scanSSELines)
	if onLine == nil {
		onLine = func() {}
	}
	return &sseReader{sc: sc, onLine: onLine}
}

// scanSSELines splits at CRLF, LF or a lone CR.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		// A CR: part of a CRLF when an LF follows, which may be unread.
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// next returns the next event with data, or the stream's error (io.EOF
// at its end; an event cut off by the end is not dispatched).
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data bytes.Buffer
	hasData := false
	for r.sc.Scan() {
		r.onLine()
		line := r.sc.Bytes()
		if len(line) == 0 {
			if hasData {
				ev.data = data.String()
				return ev, nil
			}
			ev = sseEvent{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.event = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "id":
			if !bytes.ContainsRune(value, 0) {
				ev.id = string(value)
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}
