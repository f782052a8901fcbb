// Command pgping checks that the PostgreSQL server a DSN names answers, so
// that CI fails when the database the tests need is missing instead of
// letting those tests skip. Usage: go run ./store/pgstore/internal/pgping DSN
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pgping DSN")
		os.Exit(2)
	}
	dsn := os.Args[1]
	shown := "the DSN"
	if u, err := url.Parse(dsn); err == nil {
		shown = u.Redacted()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgping: %s: %v\n", shown, err)
		os.Exit(1)
	}
	defer conn.Close(context.Background())
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		fmt.Fprintf(os.Stderr, "pgping: %s: %v\n", shown, err)
		os.Exit(1)
	}
	fmt.Printf("PostgreSQL %s at %s\n", version, shown)
}
