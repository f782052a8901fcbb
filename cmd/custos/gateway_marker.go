package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/internal/pgutil"
	"github.com/custos-runtime/custos/store"
	"github.com/custos-runtime/custos/store/pgstore"
)

// gatewayMarker is what custos serve records about the approval store it
// uses: custos approvals reads it and refuses to change anything in the
// store when ReviewerPolicy is set, since its decisions would be the OS
// user's, outside the roles, separation of duties and justifications the
// gateway enforces (approvals.go). It lives next to a file-backed store
// (SQLite, filestore: PATH + gatewayMarkerSuffix) and, in a PostgreSQL
// store, in the table gatewayMarkerTable of the store's schema. It is a
// guard against deciding around the policy by mistake, not a boundary:
// whoever can write the store can write anything into it.
type gatewayMarker struct {
	Agent     string `json:"agent"`
	Data      string `json:"data"`
	PublicURL string `json:"public_url"`
	// ReviewerPolicy says the configuration has reviewers, roles,
	// separation_of_duties or justification_required.
	ReviewerPolicy bool `json:"reviewer_policy"`
}

const (
	// gatewayMarkerSuffix is appended to a store file's path to name its
	// marker.
	gatewayMarkerSuffix = store.ServeMarkerSuffix
	// gatewayMarkerTable is the marker's table in a PostgreSQL store.
	gatewayMarkerTable = "custos_serve_marker"
)

// hasReviewerPolicy says whether cfg restricts who may decide what.
func hasReviewerPolicy(cfg config.Config) bool {
	return len(cfg.Reviewers) > 0 || len(cfg.Roles) > 0 || len(cfg.SeparationOfDuties) > 0 || len(cfg.JustificationRequired) > 0
}

// gatewayMarkerPath is where the marker of a file-backed store lives (""
// for the other kinds).
func gatewayMarkerPath(loc store.Location) string {
	if loc.Kind != store.KindSQLite && loc.Kind != store.KindFile {
		return ""
	}
	// One name for the store however it is reached (a symbolic link to
	// the file or to its directory).
	p := loc.Path
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(dir, filepath.Base(p))
	}
	return p + gatewayMarkerSuffix
}

// writeGatewayMarker records (replaces) the marker of cfg's store, at
// every start, so that it follows the configuration. The store must be
// open already: there is no marker for a store file that does not exist.
// When it cannot be written and cfg has a reviewer policy, the gateway
// does not start: custos approvals would decide around that policy.
func writeGatewayMarker(ctx context.Context, cfg config.Config) error {
	loc, err := store.Parse(cfg.Store)
	if err != nil {
		return err
	}
	m := gatewayMarker{Agent: cfg.Agent, Data: cfg.Data, PublicURL: cfg.PublicURL, ReviewerPolicy: hasReviewerPolicy(cfg)}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	switch loc.Kind {
	case store.KindPostgres:
		err = writePostgresMarker(ctx, loc, b)
	case store.KindSQLite, store.KindFile:
		err = writeFileMarker(loc, b)
	}
	if err != nil && m.ReviewerPolicy {
		return fmt.Errorf("recording that custos approvals may not decide on this store: %w", err)
	}
	return nil
}

func writeFileMarker(loc store.Location, b []byte) error {
	if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	p := gatewayMarkerPath(loc)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func writePostgresMarker(ctx context.Context, loc store.Location, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pool, _, err := pgutil.OpenPool(ctx, loc.DSN, loc.Schema, pgstore.DefaultSchema, "custos serve", 1, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Replicas starting together would race to create the table:
		// the lock migrations take serialises them.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", pgutil.MigrationLockKey); err != nil {
			return err
		}
		// Created only when missing, so that a role without CREATE can
		// run a gateway on a schema an administrator prepared.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", gatewayMarkerTable).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE TABLE "+gatewayMarkerTable+
				" (id integer PRIMARY KEY CHECK (id = 1), marker text NOT NULL)"); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+gatewayMarkerTable+" (id, marker) VALUES (1, $1) "+
			"ON CONFLICT (id) DO UPDATE SET marker = EXCLUDED.marker", string(b))
		return err
	})
}

// readGatewayMarker reads the marker of the store at loc; ok is false when
// there is none. A marker that cannot be read is an error: the caller
// fails closed.
func readGatewayMarker(ctx context.Context, loc store.Location) (m gatewayMarker, ok bool, err error) {
	var b []byte
	switch loc.Kind {
	case store.KindPostgres:
		b, ok, err = readPostgresMarker(ctx, loc)
	case store.KindSQLite, store.KindFile:
		p := gatewayMarkerPath(loc)
		b, err = os.ReadFile(p)
		ok = err == nil
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err == nil && ok {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return m, true, fmt.Errorf("the store's custos serve marker cannot be read: %w", err)
	}
	return m, ok, nil
}

func readPostgresMarker(ctx context.Context, loc store.Location) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pool, _, err := pgutil.OpenPool(ctx, loc.DSN, loc.Schema, pgstore.DefaultSchema, "custos approvals", 1, 1)
	if err != nil {
		return nil, false, err
	}
	defer pool.Close()
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", gatewayMarkerTable).Scan(&exists); err != nil || !exists {
		return nil, false, err
	}
	var s string
	err = pool.QueryRow(ctx, "SELECT marker FROM "+gatewayMarkerTable+" WHERE id = 1").Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return []byte(s), err == nil, err
}
