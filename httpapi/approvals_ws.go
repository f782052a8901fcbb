package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// websocket is the AAIS WebSocket binding: one envelope per text frame.
// The server sends an approval.snapshot as soon as the connection opens,
// then every event in sequence order (after a gap, a {"type":"gap"} frame
// and a fresh snapshot); the client sends approval.decided envelopes and
// gets each one's approval.resolved receipt (or a problem document with its
// ASC status) on the same, authenticated connection. A client that
// reconnects starts again from the snapshot, as AAIS prescribes. A client
// that lets an event wait longer than StreamMaxDelay is closed with status
// 1013 (try again later) and the reason slow_consumer; a write that takes
// longer than StreamWriteTimeout closes the connection.
func (a *approvals) websocket(w http.ResponseWriter, r *http.Request) {
	// The Origin allow-list applies here too: a WebSocket can carry
	// decisions.
	opts := &websocket.AcceptOptions{}
	if or := r.Header.Get("Origin"); or != "" {
		if !a.origins.allowed(r, false) {
			problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not connect.")
			return
		}
		opts.InsecureSkipVerify = true // checked above against the allow-list
	}
	c, err := websocket.Accept(w, r, opts)
	if err != nil {
		return
	}
	defer c.CloseNow()
	a.ws.Add(1)
	defer a.ws.Add(-1)
	c.SetReadLimit(a.o.MaxBody)
	actor, _ := r.Context().Value(actorKey{}).(aais.Actor)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	var mu sync.Mutex
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		wctx, wcancel := context.WithTimeout(ctx, a.o.StreamWriteTimeout)
		defer wcancel()
		return c.Write(wctx, websocket.MessageText, b)
	}
	go func() {
		defer cancel()
		for {
			typ, body, err := c.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageText {
				_ = c.Close(websocket.StatusUnsupportedData, "text frames only")
				return
			}
			receipt, f := a.decideBody(ctx, body, "", actor)
			var out []byte
			if f != nil {
				out = problemJSON(f.code, f.status, f.detail)
			} else if out, err = aais.Marshal(receipt); err != nil {
				out = problemJSON(asc.InternalError, http.StatusInternalServerError, "The receipt could not be encoded.")
			}
			if write(out) != nil {
				return
			}
		}
	}()
	lastPing := time.Now()
	alive := a.sessionCheck(r)
	err = a.o.Authority.Follow(ctx, 0, false, a.o.Poll, aais.Follower{
		// The encoding is shared with every other stream.
		Wire: func(_ *aais.Message, wire []byte) error { return write(wire) },
		Gap: func(p aais.EventPage) error {
			b, _ := json.Marshal(map[string]any{"type": "gap", "store_id": p.StoreID, "latest": p.Latest})
			return write(b)
		},
		Idle: func(wrote bool) error {
			if err := alive(); err != nil {
				return err
			}
			if wrote || time.Since(lastPing) < a.o.Heartbeat {
				return nil
			}
			lastPing = time.Now()
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			defer pcancel()
			return c.Ping(pctx)
		},
		IdleEvery: a.idleEvery(r),
		MaxDelay:  a.o.StreamMaxDelay,
	})
	if errors.Is(err, errSessionEnded) {
		_ = c.Close(websocket.StatusPolicyViolation, "the session ended")
		return
	}
	if errors.Is(err, aais.ErrSlowFollower) {
		// Too far behind: the client reconnects and starts from a
		// snapshot; the other streams were not held up.
		a.o.Logger.InfoContext(r.Context(), "approvals websocket: client cut off", "reason", "slow_consumer", "err", err)
		_ = c.Close(websocket.StatusTryAgainLater, "slow_consumer: too slow for the event stream; reconnect")
		return
	}
	if err != nil && ctx.Err() == nil {
		a.o.Logger.ErrorContext(r.Context(), "approvals websocket", "err", err)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
}
