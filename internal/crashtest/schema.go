package crashtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// FreshSchema returns dsn with custos_schema set to a new schema name no
// one uses, and a function that drops that schema with everything in it.
// A dsn that already names a custos_schema is returned as it is, with a
// drop that does nothing: the schema is the caller's.
func FreshSchema(dsn string) (string, func(context.Context) error, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("crashtest: the store must be a postgres:// URL")
	}
	q := u.Query()
	if q.Get("custos_schema") != "" {
		return dsn, func(context.Context) error { return nil }, nil
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	name := "custos_crash_" + hex.EncodeToString(b[:])
	q.Set("custos_schema", name)
	u.RawQuery = q.Encode()
	drop := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	return u.String(), drop, nil
}
