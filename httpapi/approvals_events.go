package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// events is GET /approvals/events, the SSE binding. Every stream of the
// process is fed by one reader of the store (aais.Authority.Follow): an
// event is read and encoded once and written to each stream from memory.
// A stream that lets an event wait longer than StreamMaxDelay, or whose
// write does not complete within StreamWriteTimeout, is ended (the first
// with a "cutoff" event naming the reason and the sequence to resume
// after); the browser's EventSource reconnects with Last-Event-ID and
// misses nothing.
func (a *approvals) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		problem(w, asc.InternalError, http.StatusInternalServerError, "Streaming is not supported here.")
		return
	}
	after, resume := uint64(0), false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, resume = parseSeq(v)
	} else if v := r.URL.Query().Get("after"); v != "" {
		after, resume = parseSeq(v)
	}
	a.sse.Add(1)
	defer a.sse.Add(-1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// arm bounds the next writes: a client that stopped reading fails
	// them within StreamWriteTimeout (at least half of it) instead of
	// holding this stream open. The deadline is moved only every half
	// timeout, not for every event.
	var armed time.Time
	arm := func() {
		if now := time.Now(); now.Sub(armed) > a.o.StreamWriteTimeout/2 {
			_ = rc.SetWriteDeadline(now.Add(a.o.StreamWriteTimeout))
			armed = now
		}
	}
	lastBeat := time.Now()
	alive := a.sessionCheck(r)
	last, sent := after, resume // the last id the client has
	head := make([]byte, 0, 64) // "id: …\nevent: …\ndata: "
	err := a.o.Authority.Follow(r.Context(), after, resume, a.o.Poll, aais.Follower{
		Wire: func(m *aais.Message, wire []byte) error {
			arm()
			// Three writes into the connection's buffer rather than a
			// copy of the event per stream kept in between.
			head = appendEventHead(head[:0], m)
			if _, err := w.Write(head); err != nil {
				return err
			}
			if _, err := w.Write(wire); err != nil {
				return err
			}
			if _, err := io.WriteString(w, "\n\n"); err != nil {
				return err
			}
			last, sent = m.Sequence, true
			return nil
		},
		Gap: func(p aais.EventPage) error {
			arm()
			_, err := fmt.Fprintf(w, "event: gap\ndata: {\"store_id\":%q,\"latest\":%d}\n\n", p.StoreID, p.Latest)
			return err
		},
		Idle: func(wrote bool) error {
			if err := alive(); err != nil {
				return err
			}
			if !wrote && time.Since(lastBeat) >= a.o.Heartbeat {
				arm()
				if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
					return err
				}
				wrote = true
			}
			if wrote {
				lastBeat = time.Now()
				arm()
				if err := rc.Flush(); err != nil {
					return err
				}
			}
			return nil
		},
		IdleEvery: a.idleEvery(r),
		MaxDelay:  a.o.StreamMaxDelay,
	})
	switch {
	case r.Context().Err() != nil, errors.Is(err, errSessionEnded):
	case errors.Is(err, aais.ErrSlowFollower):
		a.cutoff(w, fl, rc, "slow_consumer", err, last, sent)
	case isTimeout(err):
		// The client stopped reading: nothing more can reach it.
		a.o.Logger.InfoContext(r.Context(), "approval events: client cut off", "reason", "write timeout", "after", last)
	case err != nil:
		a.o.Logger.ErrorContext(r.Context(), "approval events", "err", err)
	}
}

// idleEvery is how often a stream checks its session and heartbeat: every
// second when a session authenticated it (it ends soon after the session
// does), otherwise every half Heartbeat (so a keepalive is never more
// than 1.5 Heartbeat after the last write).
func (a *approvals) idleEvery(r *http.Request) time.Duration {
	if ss, _ := r.Context().Value(sessionKey{}).(*session); ss != nil {
		return min(a.o.Heartbeat/2, time.Second)
	}
	return a.o.Heartbeat / 2
}

// cutoff ends a stream with the reason and the sequence to resume after.
func (a *approvals) cutoff(w http.ResponseWriter, fl http.Flusher, rc *http.ResponseController, reason string, err error, last uint64, sent bool) {
	a.o.Logger.InfoContext(context.Background(), "approval events: client cut off", "reason", reason, "err", err, "after", last)
	body := map[string]any{"reason": reason, "detail": err.Error()}
	if sent {
		body["resume_after"] = strconv.FormatUint(last, 10)
	}
	b, _ := json.Marshal(body)
	_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(w, "event: cutoff\ndata: %s\n\n", b); err == nil {
		fl.Flush()
	}
}

// appendEventHead appends the start of m's SSE event: its id and type and
// the data field's name. The data is m's encoding, one line, so it fits
// one data field, and a blank line ends the event.
func appendEventHead(b []byte, m *aais.Message) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, m.Sequence, 10)
	b = append(b, "\nevent: "...)
	b = append(b, m.Type...)
	return append(b, "\ndata: "...)
}

func parseSeq(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > aais.MaxSequence {
		return 0, false
	}
	return n, true
}
