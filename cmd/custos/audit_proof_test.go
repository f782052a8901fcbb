package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
	"github.com/custos-runtime/custos/store"
	"github.com/custos-runtime/custos/store/pgaudit"
	"github.com/custos-runtime/custos/store/sqliteaudit"
)

// writeTestKey writes a private gateway key file into dir and returns its
// path.
func writeTestKey(t *testing.T, dir string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(jose.JSONWebKey{Key: priv, KeyID: "agent:test#gateway-1", Algorithm: "EdDSA", Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, gatewayKeyName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A gateway's log, cut after it stopped: the head file it keeps beside
// the log proves the truncation (exit 1, "truncated"); with the head file
// gone too the chain ends after a checkpoint and verify says it cannot
// tell.
func TestAuditTruncationProven(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, dir, nil)
	if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"text": "hi"}, nil); code != 200 {
		t.Fatalf("request: %d", code)
	}
	g.stop()
	key := filepath.Join(dir, gatewayKeyName)
	if _, err := os.Stat(filepath.Join(dir, auditHeadFile)); err != nil {
		t.Fatalf("no head file: %v", err)
	}
	db := filepath.Join(dir, "custos.db")
	auditSQL(t, db, "DROP TRIGGER audit_records_no_delete", `DELETE FROM audit_records WHERE seq = (SELECT max(seq) FROM audit_records)`)
	code, out, errOut := custos(t, "", "audit", "verify", "--log", dir, "--keys", key)
	if code != 1 || out != "" || !strings.Contains(errOut, "truncated") ||
		!strings.Contains(errOut, "at least records 4 to 4 were removed after a signed checkpoint") {
		t.Fatalf("a truncated log: exit %d, %q, %q", code, out, errOut)
	}
	// custos serve refuses to write on.
	b, err := store.OpenAuditReadOnly(t.Context(), store.Location{Kind: store.KindSQLite, Path: db})
	if err != nil {
		t.Fatal(err)
	}
	_, err = openAuditHead(t.Context(), dir, b, slog.Default())
	b.Close()
	if err == nil || !strings.Contains(err.Error(), "does not hold checkpoint record 4") {
		t.Fatalf("serve over a truncated log: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, auditHeadFile)); err != nil {
		t.Fatal(err)
	}
	// What is left ends with records after the start checkpoint, which
	// are within the gateway's promise (10 minutes): pending.
	out = mustCustos(t, "", "audit", "verify", "--log", dir, "--keys", key)
	if !strings.Contains(out, "tail: 2 records after the last checkpoint (record 1") {
		t.Fatalf("without the head file: %s", out)
	}
}

// A log whose records are older than the gateway's promise allows without
// a checkpoint: a warning (exit 0), or exit 1 with --strict.
func TestAuditTailSuspected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	keyFile := writeTestKey(t, filepath.Dir(path))
	signer, err := readSigningKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := sqliteaudit.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := audit.New(b, &audit.Options{Now: func() time.Time { return auditT0 }, CheckpointEvery: 10 * time.Minute})
	if _, _, err := l.CheckpointEvent(ctx, signer, audit.EventStart); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := l.Append(ctx, audittest.Sample(audit.KindReceived, i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	code, out, errOut := custos(t, "", "audit", "verify", "--log", path, "--keys", keyFile)
	if code != 0 || !strings.Contains(out, "OK: 3 records") ||
		!strings.Contains(errOut, "custos: warning:") || !strings.Contains(errOut, "suspected, not proven") {
		t.Fatalf("a suspect tail: exit %d, %q, %q", code, out, errOut)
	}
	code, _, errOut = custos(t, "", "audit", "verify", "--log", path, "--keys", keyFile, "--strict")
	if code != 1 || !strings.Contains(errOut, "the tail may be truncated (--strict)") {
		t.Fatalf("--strict: exit %d, %q", code, errOut)
	}
}

// export --bundle, then verify --bundle offline; a bundle changed after
// export is refused with the problem named.
func TestAuditBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, dir, nil)
	if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"text": "hi"}, nil); code != 200 {
		t.Fatalf("request: %d", code)
	}
	g.stop()
	out := filepath.Join(t.TempDir(), "bundle.jsonl")
	if got := mustCustos(t, "", "audit", "export", "--bundle", "--data", dir, "--out", out); !strings.Contains(got, "exported a bundle of 4 records (2 signed checkpoints") {
		t.Fatalf("export --bundle: %s", got)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"d":`)) {
		t.Fatal("the bundle holds a private key")
	}
	got := mustCustos(t, "", "audit", "verify", "--bundle", out)
	if !strings.Contains(got, "audit bundle "+out+" OK: 4 records") || !strings.Contains(got, "clean-stop") || !strings.Contains(got, "checkpoint keys: agent:") {
		t.Fatalf("verify --bundle: %s", got)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	drop := func(i int) string {
		return strings.Join(append(append([]string(nil), lines[:i]...), lines[i+1:]...), "\n") + "\n"
	}
	other := filepath.Join(t.TempDir(), "other")
	mustCustos(t, "", "keygen", "--agent", "agent:com.example.other", "--out", other)
	otherJWKS, err := os.ReadFile(filepath.Join(other, "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, otherJWKS); err != nil {
		t.Fatal(err)
	}
	swapped := strings.Replace(string(data), string(m["jwks"]), compact.String(), 1)
	for _, tc := range []struct{ name, bundle, want string }{
		{"a record tampered", strings.Replace(string(data), `"demo.echo"`, `"demo.evil"`, 1), "altered"},
		{"the last record dropped", drop(len(lines) - 1), "records were removed from the bundle"},
		{"a checkpoint dropped", drop(1), "record 1 removed"},
		{"the JWKS swapped", swapped, "bad_checkpoint"},
		{"no manifest", drop(0), "not a manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "b.jsonl")
			if err := os.WriteFile(f, []byte(tc.bundle), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := custos(t, "", "audit", "verify", "--bundle", f)
			if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, %q, %q; want exit 1 naming %q", code, out, errOut, tc.want)
			}
		})
	}
	// The gateway's published keys given: the bundle's own are not used.
	if code, _, errOut := custos(t, "", "audit", "verify", "--bundle", out, "--keys", filepath.Join(other, "jwks.json")); code != 1 || !strings.Contains(errOut, "bad_checkpoint") {
		t.Fatalf("--keys another gateway's: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{
		{"audit", "verify", "--bundle", out, "--file", out},
		{"audit", "verify", "--bundle", out, "--data", dir},
		{"audit", "export", "--bundle", "--data", dir, "--from", "2"},
		{"audit", "export", "--data", dir, "--keys", out},
	} {
		if code, _, _ := custos(t, "", args...); code != 2 {
			t.Errorf("custos %v: exit %d, want 2", args, code)
		}
	}
	// Without keys beside the log, export --bundle says what it needs.
	path := auditFixture(t, 2)
	if code, _, errOut := custos(t, "", "audit", "export", "--bundle", "--log", path, "--out", out+".2"); code != 1 || !strings.Contains(errOut, "give --keys") {
		t.Fatalf("no keys: exit %d, %q", code, errOut)
	}
}

// A purge is checkpointed with the gateway's key beside the log; without
// it the purge says it is not.
func TestAuditPurgeCheckpointed(t *testing.T) {
	path := auditFixture(t, 4, 1, 2)
	keyFile := writeTestKey(t, filepath.Dir(path))
	out := mustCustos(t, "", "audit", "purge", "--log", path)
	if !strings.Contains(out, "redacted 2 records, checkpointed with "+keyFile) {
		t.Fatalf("purge: %s", out)
	}
	out = mustCustos(t, "", "audit", "verify", "--log", path, "--keys", keyFile)
	if !strings.Contains(out, "OK: 6 records (2 redacted)") || !strings.Contains(out, "1 signed checkpoint, the last vouching for every record up to 5") ||
		!strings.Contains(out, "tail: the chain ends with a checkpoint (record 6") {
		t.Fatalf("verify after a checkpointed purge: %s", out)
	}
	// The purge checkpoint went to the head file beside the log: a cut
	// after it is proven.
	if rec, err := readHeadRecord(filepath.Join(filepath.Dir(path), auditHeadFile)); err != nil || rec.Seq != 6 {
		t.Fatalf("head file after a purge: %+v, %v", rec, err)
	}
	auditSQL(t, path, dropAuditTriggers, `DELETE FROM audit_records WHERE seq = 6`)
	if code, _, errOut := custos(t, "", "audit", "verify", "--log", path); code != 1 || !strings.Contains(errOut, "truncated") {
		t.Fatalf("a cut after the purge checkpoint: exit %d, %q", code, errOut)
	}
	if code, _, errOut := custos(t, "", "audit", "purge", "--log", path); code != 1 || !strings.Contains(errOut, "does not hold checkpoint record 6") {
		t.Fatalf("purge on a truncated log: exit %d, %q", code, errOut)
	}
	bare := auditFixture(t, 3, 1)
	if out := mustCustos(t, "", "audit", "purge", "--log", bare); !strings.Contains(out, "not checkpointed (no gateway key") {
		t.Fatalf("purge without a key: %s", out)
	}
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := custos(t, "", "audit", "purge", "--log", path); code != 1 || !strings.Contains(errOut, "readable by others") {
		t.Fatalf("a key readable by others: exit %d, %q", code, errOut)
	}
}

// The same on PostgreSQL: the head file proves a truncation of a shared
// chain, a bundle exports and verifies, a purge is checkpointed.
func TestAuditProofPostgres(t *testing.T) {
	url := postgresLocation(t)
	ctx := t.Context()
	loc, err := store.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := writeTestKey(t, dir)
	signer, err := readSigningKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgaudit.Open(ctx, loc.DSN, &pgaudit.Options{Schema: loc.Schema})
	if err != nil {
		t.Fatal(err)
	}
	head, err := openAuditHead(ctx, dir, b, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	l := audit.New(b, &audit.Options{CheckpointEvery: 10 * time.Minute, OnCheckpoint: head.Write})
	if _, _, err := l.CheckpointEvent(ctx, signer, audit.EventStart); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		rec := audittest.Sample(audit.KindReceived, i)
		if i == 1 {
			rec.RetainUntil = auditT0
		}
		if _, err := l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := l.CheckpointEvent(ctx, signer, audit.EventStop); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if out := mustCustos(t, "", "audit", "purge", "--log", url, "--key", keyFile); !strings.Contains(out, "redacted 1 record, checkpointed") {
		t.Fatalf("purge: %s", out)
	}
	bundle := filepath.Join(t.TempDir(), "b.jsonl")
	mustCustos(t, "", "audit", "export", "--bundle", "--log", url, "--keys", keyFile, "--out", bundle)
	if out := mustCustos(t, "", "audit", "verify", "--bundle", bundle); !strings.Contains(out, "OK: 7 records (1 redacted)") {
		t.Fatalf("verify --bundle: %s", out)
	}
	headFile := filepath.Join(dir, auditHeadFile)
	if out := mustCustos(t, "", "audit", "verify", "--log", url, "--keys", keyFile, "--head", headFile); !strings.Contains(out, "OK: 7 records") {
		t.Fatalf("verify: %s", out)
	}
	conn, err := pgx.Connect(ctx, loc.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q := pgx.Identifier{loc.Schema, "audit_records"}.Sanitize()
	for _, s := range []string{"ALTER TABLE " + q + " DISABLE TRIGGER USER", "DELETE FROM " + q + " WHERE seq >= 5", "ALTER TABLE " + q + " ENABLE TRIGGER USER"} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// The head file holds the stop checkpoint (record 5): the purge
	// checkpoint came from the command line, which keeps no head file.
	code, _, errOut := custos(t, "", "audit", "verify", "--log", url, "--keys", keyFile, "--head", headFile)
	if code != 1 || !strings.Contains(errOut, "truncated") || !strings.Contains(errOut, "at least records 5 to 5 were removed after a signed checkpoint") {
		t.Fatalf("a truncated chain: exit %d, %q", code, errOut)
	}
}

// A restart after a clean stop: the new start checkpoint found the clean
// stop; the head file follows the chain; verify reports no unclean start.
// A log whose last run did not stop cleanly gets a start that says so.
func TestServeRestartCheckpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, dir, nil)
	g.stop()
	g2 := startGateway(t, dir, g)
	if code, _, _ := g2.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"text": "hi"}, nil); code != 200 {
		t.Fatalf("request: %d", code)
	}
	g2.stop()
	key := filepath.Join(dir, gatewayKeyName)
	out := mustCustos(t, "", "audit", "verify", "--data", dir, "--keys", key)
	if !strings.Contains(out, "4 signed checkpoints") || !strings.Contains(out, "clean-stop") || strings.Contains(out, "without a clean stop before") {
		t.Fatalf("after a clean restart: %s", out)
	}
	var recs []audit.Record
	exported := filepath.Join(t.TempDir(), "export.jsonl")
	mustCustos(t, "", "audit", "export", "--data", dir, "--out", exported)
	f, err := os.Open(exported)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := audit.ReadJSONL(f, func(r audit.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	c, err := audit.CheckpointOf(&recs[2])
	if err != nil || c.Event != audit.EventStart || c.Found != audit.FoundCleanStop || c.Every != checkpointEvery {
		t.Fatalf("the second start: %+v, %v", c, err)
	}
	head, err := readHeadRecord(filepath.Join(dir, auditHeadFile))
	if err != nil || head.Seq != recs[len(recs)-1].Seq {
		t.Fatalf("head file %+v, %v; want the last record %d", head, err, len(recs))
	}
	// The stop checkpoint removed, as after a kill (and the head file
	// with it, as a kill before the stop leaves the previous one):
	// the next start says it found no clean stop.
	auditSQL(t, filepath.Join(dir, "custos.db"), "DROP TRIGGER audit_records_no_delete", `DELETE FROM audit_records WHERE seq = (SELECT max(seq) FROM audit_records)`)
	if err := os.Remove(filepath.Join(dir, auditHeadFile)); err != nil {
		t.Fatal(err)
	}
	g3 := startGateway(t, dir, g)
	g3.stop()
	out = mustCustos(t, "", "audit", "verify", "--data", dir, "--keys", key)
	if !strings.Contains(out, "the gateway started 1 time without a clean stop before") {
		t.Fatalf("after a kill: %s", out)
	}
}
