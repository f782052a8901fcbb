package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// Channel is one place requests are announced.
type Channel interface {
	// Name is the channel's configured name (unique).
	Name() string
	// Announce delivers the notice of a pending request, and returns what
	// the channel needs to refer to it later (a Slack message's channel
	// and ts; "" when nothing). It retries as the channel does, and
	// returns an error when the notice was not delivered.
	Announce(ctx context.Context, n Notice) (ref string, err error)
	// Resolve reports that an announced request was resolved; ref is what
	// Announce returned.
	Resolve(ctx context.Context, ref string, n Notice, r Resolved) error
}

// Routed is a channel and the requests it announces.
type Routed struct {
	Channel Channel
	Route   Route
}

// Events is where the notifier reads the approval stream: an
// *aais.Authority.
type Events interface {
	Follow(ctx context.Context, after uint64, resume bool, poll time.Duration, f aais.Follower) error
	State(ctx context.Context, id string) (aais.RequestState, error)
}

// Options configures a Notifier.
type Options struct {
	Events   Events
	Channels []Routed
	// Inbox is the web inbox's base URL, for the links in notices.
	Inbox     string
	Redaction Redaction
	// StatePath is the file the notifier keeps its position and the
	// announcements not resolved yet in, so that a restart continues
	// where it stopped instead of announcing everything again. Empty: the
	// position is kept in memory only, and every start announces the
	// pending requests again.
	StatePath string
	// Poll is the Follow poll interval (250 ms when zero).
	Poll time.Duration
	// Logger receives delivery failures (nothing is logged when nil).
	Logger *slog.Logger
}

// Notifier follows the approval stream (one Follow per Notifier; run one
// per process) and announces new requests, and their resolution, on the
// channels whose routes cover them.
//
// Delivery is at least once: the position is saved after each event is
// delivered to every channel, so a process stopped in between delivers
// that event again after its restart, with the same notice ID (the
// webhook-id a Standard Webhooks receiver drops duplicates by).
type Notifier struct {
	o     Options
	log   *slog.Logger
	mu    sync.Mutex
	state notifierState
}

// notifierState is what StatePath holds.
type notifierState struct {
	// Sequence is the position: every event up to it is delivered. (A
	// store reset or compacted past it is a gap: Follow starts again from
	// a snapshot.)
	Sequence uint64 `json:"sequence"`
	// Started says a position was ever taken (Sequence 0 is one).
	Started bool `json:"started"`
	// Announced are the pending requests announced, by request id.
	Announced map[string]*announced `json:"announced"`
}

// announced is one request's announcement: the notice and each channel's
// reference.
type announced struct {
	Notice Notice            `json:"notice"`
	Refs   map[string]string `json:"refs"`
}

// maxAnnounced bounds the remembered announcements: past it the oldest are
// forgotten (their resolution is then not reported).
const maxAnnounced = 10000

// New returns a Notifier; Run starts it.
func New(o Options) (*Notifier, error) {
	if o.Events == nil {
		return nil, errors.New("notify: a notifier needs the approval events")
	}
	seen := map[string]bool{}
	for _, c := range o.Channels {
		if c.Channel == nil {
			return nil, errors.New("notify: a nil channel")
		}
		if seen[c.Channel.Name()] {
			return nil, fmt.Errorf("notify: two channels named %q", c.Channel.Name())
		}
		seen[c.Channel.Name()] = true
		if err := c.Route.Check(); err != nil {
			return nil, fmt.Errorf("notify: channel %s: %w", c.Channel.Name(), err)
		}
	}
	n := &Notifier{o: o, log: o.Logger, state: notifierState{Announced: map[string]*announced{}}}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if o.StatePath != "" {
		b, err := os.ReadFile(o.StatePath)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("notify: %w", err)
		default:
			if err := json.Unmarshal(b, &n.state); err != nil {
				return nil, fmt.Errorf("notify: %s is not a notifier state: %w", o.StatePath, err)
			}
			if n.state.Announced == nil {
				n.state.Announced = map[string]*announced{}
			}
		}
	}
	return n, nil
}

// Run follows the stream until ctx ends (and returns nil then), retrying
// after a store error.
func (n *Notifier) Run(ctx context.Context) error {
	for {
		n.mu.Lock()
		after, resume := n.state.Sequence, n.state.Started
		n.mu.Unlock()
		err := n.o.Events.Follow(ctx, after, resume, n.o.Poll, aais.Follower{
			Message: func(m *aais.Message) error { return n.handle(ctx, m) },
			Gap: func(p aais.EventPage) error {
				n.log.WarnContext(ctx, "notifications: the event stream was reset or compacted; announcing from a snapshot",
					"after", after, "store", p.StoreID)
				return nil
			},
		})
		if ctx.Err() != nil {
			return nil
		}
		n.log.ErrorContext(ctx, "notifications: following the approval stream failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// handle delivers one message of the stream and saves the position.
func (n *Notifier) handle(ctx context.Context, m *aais.Message) error {
	switch m.Type {
	case aais.TypeSnapshot:
		if err := n.snapshot(ctx, m); err != nil {
			return err
		}
		return n.advance(m.Snapshot.AsOfSequence)
	case aais.TypeRequested:
		if err := n.requested(ctx, m.Request, m.Sequence); err != nil {
			return err
		}
	case aais.TypeResolved:
		n.resolved(ctx, m.Resolution, m.Sequence)
	}
	return n.advance(m.Sequence)
}

// snapshot announces the pending requests not announced yet, and reports
// the resolution of the announced ones that are no longer pending.
func (n *Notifier) snapshot(ctx context.Context, m *aais.Message) error {
	pending := map[string]bool{}
	for i := range m.Snapshot.Pending {
		r := &m.Snapshot.Pending[i]
		pending[r.ID] = true
		n.mu.Lock()
		_, done := n.state.Announced[r.ID]
		n.mu.Unlock()
		if !done {
			n.announce(ctx, r, m.Snapshot.AsOfSequence)
		}
	}
	n.mu.Lock()
	var gone []string
	for id := range n.state.Announced {
		if !pending[id] {
			gone = append(gone, id)
		}
	}
	n.mu.Unlock()
	for _, id := range gone {
		st, err := n.o.Events.State(ctx, id)
		if errors.Is(err, aais.ErrUnknownRequest) {
			n.forget(id)
			continue
		}
		if err != nil {
			return err
		}
		if st.Resolution != nil && st.Resolution.Event != nil && st.Resolution.Event.Resolution != nil {
			n.resolved(ctx, st.Resolution.Event.Resolution, st.Resolution.Event.Sequence)
		}
	}
	return nil
}

// requested announces a new request, unless it was resolved already (a
// remembered rule approved it in the same write) or announced before.
func (n *Notifier) requested(ctx context.Context, req *aais.Request, seq uint64) error {
	n.mu.Lock()
	_, done := n.state.Announced[req.ID]
	n.mu.Unlock()
	if done {
		return nil
	}
	st, err := n.o.Events.State(ctx, req.ID)
	if err != nil {
		return err
	}
	if !st.Pending() {
		return nil
	}
	n.announce(ctx, req, seq)
	return nil
}

// announce delivers req's notice to every channel whose route covers it,
// concurrently, and remembers the references.
func (n *Notifier) announce(ctx context.Context, req *aais.Request, seq uint64) {
	// A delivery that started finishes even when the notifier is stopped
	// meanwhile: a message posted but whose reference was lost could
	// never be updated when the request resolves.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryTimeout)
	defer cancel()
	note := NewNotice(req, seq, n.o.Inbox, n.o.Redaction)
	a := &announced{Notice: note, Refs: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range n.o.Channels {
		if !c.Route.Matches(note) {
			continue
		}
		wg.Go(func() {
			ref, err := c.Channel.Announce(ctx, note)
			if err != nil {
				n.log.ErrorContext(ctx, "notifications: not delivered", "channel", c.Channel.Name(), "request", req.ID, "err", err)
				return
			}
			mu.Lock()
			a.Refs[c.Channel.Name()] = ref
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(a.Refs) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.state.Announced) >= maxAnnounced {
		var oldest string
		for id, x := range n.state.Announced {
			if oldest == "" || x.Notice.Sequence < n.state.Announced[oldest].Notice.Sequence {
				oldest = id
			}
		}
		delete(n.state.Announced, oldest)
	}
	n.state.Announced[req.ID] = a
}

// resolved reports a resolution on the channels that announced the
// request.
func (n *Notifier) resolved(ctx context.Context, res *aais.Resolution, seq uint64) {
	n.mu.Lock()
	a := n.state.Announced[res.RequestID]
	n.mu.Unlock()
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryTimeout)
	defer cancel()
	r := NewResolved(res, seq)
	var wg sync.WaitGroup
	for _, c := range n.o.Channels {
		ref, ok := a.Refs[c.Channel.Name()]
		if !ok {
			continue
		}
		wg.Go(func() {
			if err := c.Channel.Resolve(ctx, ref, a.Notice, r); err != nil {
				n.log.ErrorContext(ctx, "notifications: resolution not delivered", "channel", c.Channel.Name(), "request", res.RequestID, "err", err)
			}
		})
	}
	wg.Wait()
	n.forget(res.RequestID)
}

// deliveryTimeout bounds one announcement or resolution on all channels,
// which run to completion even when the notifier is being stopped.
const deliveryTimeout = 30 * time.Second

func (n *Notifier) forget(id string) {
	n.mu.Lock()
	delete(n.state.Announced, id)
	n.mu.Unlock()
}

// advance records that everything up to seq is delivered, and saves the
// state.
func (n *Notifier) advance(seq uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.state.Sequence, n.state.Started = seq, true
	if n.o.StatePath == "" {
		return nil
	}
	b, err := json.Marshal(n.state)
	if err != nil {
		return err
	}
	return writeFileAtomic(n.o.StatePath, b)
}

// Channels returns the channels the notifier announces on, with their
// routes (an Escalator follows up on the same ones).
func (n *Notifier) Channels() []Routed { return slices.Clone(n.o.Channels) }

// Redaction returns what the notifier leaves out of its notices (an
// Escalator's follow-ups carry the same notices).
func (n *Notifier) Redaction() Redaction { return n.o.Redaction }

// Position returns the last sequence delivered, and whether there is one.
func (n *Notifier) Position() (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state.Sequence, n.state.Started
}

// writeFileAtomic replaces path with b (mode 0600) so that a crash leaves
// the old file or the new one, never a part.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
