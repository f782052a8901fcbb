// Package pgtest is what the PostgreSQL tests of Custos share: the test
// database from the environment, and a fresh schema per test.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable holding the DSN of the PostgreSQL
// database the tests use; without it they skip (.ci/run sets it, so in CI
// they run). Each test works in its own schema, dropped when it ends.
const EnvDSN = "CUSTOS_TEST_POSTGRES_DSN"

// DSN returns the test database's DSN, or skips the test without one.
func DSN(t testing.TB) string {
	t.Helper()
	d := os.Getenv(EnvDSN)
	if d == "" {
		t.Skip(EnvDSN + " not set: no PostgreSQL to test against")
	}
	return d
}

// Schema returns the name of a schema no other test uses, and drops it
// (with everything in it) when the test ends, after the stores opened on
// it are closed (cleanups run last-registered first).
func Schema(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "custos_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// SchemaDSN is the test database's URL with custos_schema=schema and any
// further query parameters given as key, value pairs.
func SchemaDSN(t testing.TB, schema string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("custos_schema", schema)
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
