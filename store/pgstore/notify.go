package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/internal/pgutil"
)

// Notification is what a subscription delivers: the store has recorded
// events up to Sequence. It is a hint to read the log (EventsAfter), never
// the events themselves.
type Notification struct {
	// StoreID is the identity of the store that recorded the event; a
	// change means the store was reset (Sequence is then 0 or counts
	// from the new start).
	StoreID string
	// Sequence is the latest sequence known when the notification was
	// sent.
	Sequence uint64
	// Resync is true when the notification does not come from a write
	// but from (re)connecting the listener: notifications may have been
	// lost before it, and the receiver must read the log from where it
	// is rather than trust that it saw every write.
	Resync bool
}

// channelName is the LISTEN/NOTIFY channel of the stores in schema:
// "custos:" and the schema name, or a digest of it when that would exceed
// PostgreSQL's 63-byte identifier limit.
func channelName(schema string) string {
	ch := "custos:" + schema
	if len(ch) > 63 {
		sum := sha256.Sum256([]byte(schema))
		ch = "custos:" + hex.EncodeToString(sum[:16])
	}
	return ch
}

// Channel returns the LISTEN/NOTIFY channel the store notifies on after
// every committed write, with the payload "<store_id>:<sequence>".
func (s *Store) Channel() string { return s.channel }

// Subscribe delivers notifications of this store's writes, whichever
// replica (Store on the same schema) made them. It LISTENs on a dedicated
// connection (not one of the pool's), and first delivers the latest
// sequence read after LISTEN took effect (Resync), so nothing recorded
// after that read can be missed without a later notification.
//
// The channel holds at most one notification: a slow receiver gets the
// most recent one, not every one (the log, not the channel, has every
// event). When the connection fails, the subscription reconnects with
// backoff and then delivers the latest sequence again (Resync); writes
// made while it was disconnected are therefore caught up by reading
// EventsAfter from the last sequence the receiver applied. The channel is
// closed when ctx is done or the Store is closed.
//
// Notifications are hints, the log is the truth: a receiver must treat a
// notification as "read EventsAfter(last applied)" and must not assume it
// saw every sequence.
func (s *Store) Subscribe(ctx context.Context) (<-chan Notification, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, wrap(errClosed)
	}
	s.subs.Add(1)
	s.mu.Unlock()
	conn, first, err := s.listen(ctx)
	if err != nil {
		s.subs.Done()
		return nil, wrap(err)
	}
	out := make(chan Notification, 1)
	out <- first
	// The subscription lives until ctx or the Store ends.
	lctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	go func() {
		defer s.subs.Done()
		defer stop()
		defer cancel()
		defer close(out)
		s.listenLoop(lctx, conn, out)
	}()
	return out, nil
}

// listen opens a connection, LISTENs on the store's channel and reads the
// latest sequence.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, Notification, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenName(cfg.RuntimeParams["application_name"])
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, Notification{}, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, Notification{}, err
	}
	n := Notification{Resync: true}
	var latest int64
	if err := conn.QueryRow(ctx, "SELECT store_id, latest_sequence FROM meta WHERE singleton").Scan(&n.StoreID, &latest); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, Notification{}, err
	}
	n.Sequence = uint64(max(latest, 0))
	return conn, n, nil
}

// listenName is the application_name of a listening connection: the
// pool's with "-listen" appended (within PostgreSQL's 63 bytes), so that
// an operator who names the pool can still tell the listeners apart.
func listenName(pool string) string {
	const suffix = "-listen"
	if pool == "" {
		pool = ApplicationName
	}
	if len(pool) > 63-len(suffix) {
		pool = pool[:63-len(suffix)]
	}
	return pool + suffix
}

// listenLoop waits for notifications on conn and delivers them, replacing
// conn when it fails, until ctx is done.
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn, out chan Notification) {
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	delay := 50 * time.Millisecond
	for {
		if conn == nil {
			if err := pgutil.Sleep(ctx, delay); err != nil {
				return
			}
			c, first, err := s.listen(ctx)
			if err != nil {
				delay = min(2*delay, 5*time.Second)
				continue
			}
			conn, delay = c, 50*time.Millisecond
			deliver(out, first)
		}
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			_ = conn.Close(context.Background())
			conn = nil
			continue
		}
		if n, ok := parsePayload(msg.Payload); ok {
			deliver(out, n)
		}
	}
}

// deliver puts n on out, replacing an undelivered older notification.
func deliver(out chan Notification, n Notification) {
	for {
		select {
		case out <- n:
			return
		default:
		}
		select {
		case old := <-out:
			// A pending resync must not be hidden by a plain
			// notification: keep the flag.
			n.Resync = n.Resync || old.Resync
		default:
		}
	}
}

// parsePayload reads "<store_id>:<sequence>".
func parsePayload(p string) (Notification, bool) {
	id, seq, ok := strings.Cut(p, ":")
	if !ok || id == "" {
		return Notification{}, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return Notification{}, false
	}
	return Notification{StoreID: id, Sequence: n}, true
}

// Changes implements aais.ChangeNotifier over Subscribe: Authority.Follow
// on one replica reads the log as soon as any replica records an event.
// Follow calls Changes once per Store in a process, however many followers
// (reviewers' event streams) it serves: one LISTEN connection each.
func (s *Store) Changes(ctx context.Context) (<-chan struct{}, error) {
	sub, err := s.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range sub {
			select {
			case out <- struct{}{}:
			default: // one pending wake-up is enough
			}
		}
	}()
	return out, nil
}
