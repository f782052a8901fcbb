package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/authz"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/store"
	"github.com/custos-runtime/custos/store/pgaudit"
	"github.com/custos-runtime/custos/store/pgexchange"
	"github.com/custos-runtime/custos/store/pgratelimit"
	"github.com/custos-runtime/custos/store/pgreplay"
	"github.com/custos-runtime/custos/store/pgstore"
	"github.com/custos-runtime/custos/store/sqliteaudit"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

// gatewayState is where custos serve keeps its state: in the data
// directory (SQLite files, in-process replay set and rate limits) for one
// gateway, or, when the approval store is on PostgreSQL, all of it in the
// same database and schema, shared by every replica.
type gatewayState struct {
	exchanges exchange.Backend
	audit     audit.Backend
	// replay and limiter are nil for the in-process ones.
	replay  authz.ReplaySet
	limiter gateway.RateLimiter
	// instance is this replica's name for its claims; "" for a gateway
	// alone on its exchange store (it recovers every interrupted claim).
	instance string
	closers  []io.Closer
}

func (s *gatewayState) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i].Close())
	}
	return errors.Join(errs...)
}

// openState opens the exchange store, the audit log backend and the
// replay state next to the approval store st (at loc).
func openState(ctx context.Context, cfg config.Config, loc store.Location, st store.Store) (_ *gatewayState, err error) {
	s := &gatewayState{}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	pg, shared := st.(*pgstore.Store)
	if !shared {
		xs, err := sqliteexchange.Open(ctx, filepath.Join(cfg.Data, "exchanges.db"), nil)
		if err != nil {
			return nil, err
		}
		s.exchanges = xs
		s.closers = append(s.closers, xs)
	} else {
		// Replicas: everything they must agree on lives in the one
		// database and schema, on the approval store's pool.
		s.instance = cfg.Instance
		xs, err := pgexchange.Open(ctx, loc.DSN, &pgexchange.Options{Schema: loc.Schema, Instance: cfg.Instance})
		if err != nil {
			return nil, fmt.Errorf("exchange store: %w", err)
		}
		s.exchanges = xs
		s.closers = append(s.closers, xs)
		replay, err := pgreplay.New(ctx, pg.Pool(), &pgreplay.Options{Schema: loc.Schema})
		if err != nil {
			return nil, fmt.Errorf("replay set: %w", err)
		}
		s.replay = replay
		s.closers = append(s.closers, replay)
		lim, err := pgratelimit.New(ctx, pg.Pool(), gateway.RateLimit{PerSecond: cfg.RateLimit.PerSecond, Burst: cfg.RateLimit.Burst},
			&pgratelimit.Options{Schema: loc.Schema})
		if err != nil {
			return nil, fmt.Errorf("rate limits: %w", err)
		}
		s.limiter = lim
		s.closers = append(s.closers, lim)
	}
	al, err := store.Parse(cfg.AuditLog)
	if err != nil {
		return nil, fmt.Errorf("audit_log: %w", err)
	}
	switch al.Kind {
	case store.KindPostgres:
		var b *pgaudit.Backend
		if shared && al.DSN == loc.DSN {
			b, err = pgaudit.New(ctx, pg.Pool(), &pgaudit.Options{Schema: al.Schema})
		} else {
			b, err = pgaudit.Open(ctx, al.DSN, &pgaudit.Options{Schema: al.Schema})
		}
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		s.audit = b
	case store.KindSQLite:
		b, err := sqliteaudit.Open(ctx, al.Path, nil)
		if err != nil {
			return nil, err
		}
		s.audit = b
	default:
		return nil, fmt.Errorf("audit_log %s: want a file or a postgres:// URL", cfg.AuditLog)
	}
	// audit.Log.Close closes the backend.
	return s, nil
}
