package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgstore"
)

// Twenty followers of one Store hold one LISTEN connection between them,
// not one each, and the notification alone (the poll is an hour) brings
// them every event.
func TestFollowersShareOneListener(t *testing.T) {
	const followers, events, pool = 20, 5, 2
	var b [6]byte
	_, _ = rand.Read(b[:])
	app := "custos_fanout_" + hex.EncodeToString(b[:])
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	s, err := pgstore.Open(t.Context(), u.String(), &pgstore.Options{Schema: pgtest.Schema(t), MaxConns: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, c)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var ready sync.WaitGroup
	got := make([]chan uint64, followers)
	done := make(chan error, followers)
	for i := range got {
		got[i] = make(chan uint64, events)
		ready.Add(1)
		var once sync.Once
		go func() {
			done <- a.Follow(ctx, 0, false, time.Hour, aais.Follower{
				Message: func(m *aais.Message) error {
					if m.Type != aais.TypeSnapshot {
						got[i] <- m.Sequence
					}
					return nil
				},
				Idle: func(bool) error { once.Do(ready.Done); return nil },
			})
		}()
	}
	ready.Wait()
	for i := range events {
		if _, _, err := a.Create(t.Context(), aaistest.Request(t, c.Now(), fmt.Sprint(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range got {
		for want := uint64(1); want <= events; want++ {
			select {
			case seq := <-ch:
				if seq != want {
					t.Fatalf("follower %d: %d, want %d", i, seq, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("follower %d: no event %d (the notification did not wake the reader)", i, want)
			}
		}
	}
	conn, err := pgx.Connect(t.Context(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	// The pool's connections and one LISTEN connection.
	if n > pool+1 {
		t.Fatalf("%d followers hold %d connections (pool of %d)", followers, n, pool)
	}
	cancel()
	for range got {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Follow: %v", err)
		}
	}
}
