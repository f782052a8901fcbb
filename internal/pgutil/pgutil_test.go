package pgutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestCheckSchema(t *testing.T) {
	for _, bad := range []string{"", string(make([]byte, 64)), "a\x00b"} {
		if CheckSchema(bad) == nil {
			t.Errorf("CheckSchema(%q) accepted", bad)
		}
	}
	if err := CheckSchema("custos"); err != nil {
		t.Fatal(err)
	}
}

func TestPoolConfig(t *testing.T) {
	cfg, err := PoolConfig("postgres://u@h/db", "my schema", "app", 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	rp := cfg.ConnConfig.RuntimeParams
	if cfg.MaxConns != 8 || rp["search_path"] != `"my schema"` || rp["application_name"] != "app" {
		t.Fatalf("%d %v", cfg.MaxConns, rp)
	}
	cfg, err = PoolConfig("postgres://u@h/db?pool_max_conns=3&application_name=mine", "s", "app", 0, 8)
	if err != nil || cfg.MaxConns != 3 || cfg.ConnConfig.RuntimeParams["application_name"] != "mine" {
		t.Fatalf("%v %+v", err, cfg)
	}
	if cfg, err = PoolConfig("postgres://u@h/db?pool_max_conns=3", "s", "app", 5, 8); err != nil || cfg.MaxConns != 5 {
		t.Fatalf("%v %+v", err, cfg)
	}
	if _, err := PoolConfig("postgres://%zz", "s", "app", 0, 8); err == nil {
		t.Fatal("malformed DSN accepted")
	}
	if _, err := PoolConfig("postgres://u@h/db", "", "app", 0, 8); err == nil {
		t.Fatal("empty schema accepted")
	}
}

func TestTransient(t *testing.T) {
	for code, want := range map[string]bool{"40001": true, "40P01": true, "57P01": true, "08006": true, "23505": false, "P0001": false} {
		if got := Transient(&pgconn.PgError{Code: code}); got != want {
			t.Errorf("Transient(%s) = %v", code, got)
		}
	}
	if Transient(errors.New("x")) {
		t.Error("a plain error is transient")
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func TestSplitDSN(t *testing.T) {
	for _, c := range []struct{ in, dsn, schema string }{
		{"postgres://u@h/db?sslmode=disable&custos_schema=s1", "postgres://u@h/db?sslmode=disable", "s1"},
		{"postgresql://u@h/db", "postgresql://u@h/db", ""},
		{"host=h dbname=db", "host=h dbname=db", ""},
	} {
		dsn, schema, err := SplitDSN(c.in)
		if err != nil || dsn != c.dsn || schema != c.schema {
			t.Errorf("SplitDSN(%q) = %q, %q, %v", c.in, dsn, schema, err)
		}
	}
}
