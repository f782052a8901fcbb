package sqlitestore

import (
	"context"
	"sync"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/sqlitedb"
)

var _ aais.ChangeNotifier = (*Store)(nil)

// watchers are the Changes channels of this process, by database file:
// every Store of the process open on the file wakes them after a write, so
// a follower hears of an in-process write at once whichever Store (or
// handle) made it. Writes of other processes are not announced: SQLite has
// no cross-process notification, and followers poll for those.
var watchers = struct {
	sync.Mutex
	byPath map[string]map[chan struct{}]struct{}
}{byPath: map[string]map[chan struct{}]struct{}{}}

// Changes implements aais.ChangeNotifier: the channel receives a value
// after each write made through a Store of this process open on the same
// file (one pending value at most: a wake-up, not a count). It is closed
// when ctx ends.
func (s *Store) Changes(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := s.db.Path()
	c := make(chan struct{}, 1)
	watchers.Lock()
	set := watchers.byPath[path]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		watchers.byPath[path] = set
	}
	set[c] = struct{}{}
	watchers.Unlock()
	context.AfterFunc(ctx, func() {
		watchers.Lock()
		defer watchers.Unlock()
		delete(set, c)
		if len(set) == 0 { // so it is still byPath[path]: a set is only replaced once empty
			delete(watchers.byPath, path)
		}
		close(c)
	})
	return c, nil
}

// write is s.db.Write followed by a wake-up of the file's watchers. A
// failed write wakes them too: a spurious wake-up costs one read, a missed
// one a poll interval.
//
// Inside a unit of work (sqlitedb.DB.Unit) the write returns before its
// transaction commits: the watchers are woken when the unit commits, so
// that a follower never reads too early and waits for the next poll.
func (s *Store) write(ctx context.Context, fn func(*sqlitedb.Tx) error) error {
	err := s.db.Write(ctx, fn)
	path := s.db.Path()
	s.db.AfterCommit(ctx, func() { wake(path) })
	return err
}

func wake(path string) {
	watchers.Lock()
	defer watchers.Unlock()
	for c := range watchers.byPath[path] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
