package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
	"github.com/custos-runtime/custos/store/sqliteaudit"
)

var auditT0 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// auditFixture writes n records to a new SQLite audit log; records whose
// number is in expire get a retain_until in the past (2020-01-02).
func auditFixture(t *testing.T, n int, expire ...int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	auditAppend(t, path, 1, n, expire...)
	return path
}

// auditAppend appends records first..last to the log at path.
func auditAppend(t *testing.T, path string, first, last int, expire ...int) {
	t.Helper()
	ctx := context.Background()
	b, err := sqliteaudit.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := audit.New(b, &audit.Options{Now: func() time.Time { return auditT0 }})
	defer l.Close()
	for i := first; i <= last; i++ {
		rec := audittest.Sample(audit.KindReceived, i)
		for _, e := range expire {
			if e == i {
				rec.RetainUntil = auditT0.AddDate(0, 0, 1)
			}
		}
		if _, err := l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
}

func auditSQL(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

const dropAuditTriggers = "DROP TRIGGER records_no_delete; DROP TRIGGER records_only_redact"

func mustCustos(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, out, errOut := custos(t, stdin, args...)
	if code != 0 {
		t.Fatalf("custos %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
	}
	return out
}

func TestAuditVerify(t *testing.T) {
	path := auditFixture(t, 5)
	out := mustCustos(t, "", "audit", "verify", "--log", path)
	want := "audit log " + path + " OK: 5 records (0 redacted), seq 1..5, head sha256:"
	if !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 2 || !strings.Contains(out, "\ntail: no checkpoint: nothing in the chain is signed") {
		t.Errorf("stdout %q, want %q...", out, want)
	}

	// A directory names DIR/audit.db; $CUSTOS_AUDIT_LOG is the default.
	if out := mustCustos(t, "", "audit", "verify", "--log", filepath.Dir(path)); !strings.Contains(out, "OK: 5 records") {
		t.Errorf("directory: %q", out)
	}
	t.Setenv("CUSTOS_AUDIT_LOG", path)
	if out := mustCustos(t, "", "audit", "verify"); !strings.Contains(out, "OK: 5 records") {
		t.Errorf("$CUSTOS_AUDIT_LOG: %q", out)
	}

	out = mustCustos(t, "", "audit", "verify", "--log", path, "--json")
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.OK() || rep.Records != 5 || rep.LastSeq != 5 {
		t.Errorf("--json: %q (%v)", out, err)
	}
}

func TestAuditDefaultPath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CUSTOS_DATA", dir)
	t.Setenv("CUSTOS_AUDIT_LOG", "")
	auditAppend(t, filepath.Join(dir, "audit.db"), 1, 2)
	if out := mustCustos(t, "", "audit", "verify"); !strings.Contains(out, filepath.Join(dir, "audit.db")+" OK: 2 records") {
		t.Errorf("stdout %q", out)
	}
}

// The audit commands find the log custos serve writes by the data
// directory's rule, and a missing one is named with where the name came
// from.
func TestAuditDataDirectory(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	t.Setenv("CUSTOS_DATA", "")
	t.Setenv("CUSTOS_AUDIT_LOG", "")
	for _, sub := range [][]string{{"verify"}, {"export"}, {"purge"}} {
		code, _, errOut := custos(t, "", append([]string{"audit"}, sub...)...)
		want := "no audit log at " + filepath.Join(work, "custos-data", "custos.db") + " (the data directory, the default ./custos-data)"
		if code != exitFailure || !strings.Contains(errOut, want) {
			t.Errorf("%v: exit %d, %q; want %q", sub, code, errOut, want)
		}
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Fatalf("created %v", entries)
	}
	if err := os.MkdirAll(filepath.Join(work, "custos-data"), 0o700); err != nil {
		t.Fatal(err)
	}
	auditAppend(t, filepath.Join(work, "custos-data", "audit.db"), 1, 3)
	if out := mustCustos(t, "", "audit", "verify"); !strings.Contains(out, "OK: 3 records") {
		t.Errorf("./custos-data: %q", out)
	}
	other := t.TempDir()
	auditAppend(t, filepath.Join(other, "audit.db"), 1, 1)
	t.Setenv("CUSTOS_AUDIT_LOG", filepath.Join(work, "nothing.db"))
	if out := mustCustos(t, "", "audit", "verify", "--data", other); !strings.Contains(out, "OK: 1 record ") {
		t.Errorf("--data over $CUSTOS_AUDIT_LOG: %q", out)
	}
	for _, args := range [][]string{
		{"audit", "verify", "--data", other, "--log", other},
		{"audit", "verify", "--data", other, "--file", "x.jsonl"},
		{"audit", "verify", "--log", ""},
		{"audit", "verify", "--data", ""},
	} {
		if code, _, errOut := custos(t, "", args...); code != exitUsage {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
	}
}

func TestAuditExportAndVerifyFile(t *testing.T) {
	path := auditFixture(t, 6, 2, 3)
	out := mustCustos(t, "", "audit", "purge", "--log", path)
	if !strings.Contains(out, "redacted 2 records") {
		t.Fatalf("purge: %q", out)
	}
	if out := mustCustos(t, "", "audit", "purge", "--log", path); !strings.Contains(out, "nothing to purge") {
		t.Errorf("second purge: %q", out)
	}
	out = mustCustos(t, "", "audit", "verify", "--log", path)
	if !strings.Contains(out, "OK: 7 records (2 redacted), seq 1..7") {
		t.Errorf("after purge: %q", out)
	}

	// To standard output, then verified from standard input.
	export := mustCustos(t, "", "audit", "export", "--log", path)
	if n := strings.Count(export, "\n"); n != 7 {
		t.Fatalf("export has %d lines, want 7:\n%s", n, export)
	}
	out = mustCustos(t, export, "audit", "verify", "--file", "-")
	if !strings.Contains(out, "audit export on standard input OK: 7 records (2 redacted), seq 1..7") {
		t.Errorf("verify --file -: %q", out)
	}

	// To a file, mode 0600.
	file := filepath.Join(t.TempDir(), "export.jsonl")
	out = mustCustos(t, "", "audit", "export", "--log", path, "--out", file)
	if !strings.Contains(out, "exported 7 records") {
		t.Errorf("export --out: %q", out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("export file: %v, %v", fi, err)
	}
	if data, _ := os.ReadFile(file); string(data) != export {
		t.Errorf("export file differs from standard output")
	}
	if out := mustCustos(t, "", "audit", "verify", "--file", file); !strings.Contains(out, "OK: 7 records") {
		t.Errorf("verify --file: %q", out)
	}

	// A range: starts after seq 1, so it is checked as a partial chain.
	part := mustCustos(t, "", "audit", "export", "--log", path, "--from", "4", "--to", "6")
	lines := strings.Split(strings.TrimSpace(part), "\n")
	if len(lines) != 3 {
		t.Fatalf("--from 4 --to 6: %d lines", len(lines))
	}
	for i, line := range lines {
		rec, err := audit.ParseRecord([]byte(line))
		if err != nil || rec.Seq != uint64(4+i) {
			t.Errorf("line %d: seq %d, %v", i, rec.Seq, err)
		}
	}
	out = mustCustos(t, part, "audit", "verify", "--file", "-")
	if !strings.Contains(out, "partial audit export on standard input OK: 3 records (0 redacted), seq 4..6") ||
		!strings.Contains(out, "record 4 to earlier records is taken as given") {
		t.Errorf("partial: %q", out)
	}
	// Starting at 1 and cut in the middle of a redaction: the export ends
	// with a redacted record, refused unless --partial.
	head := mustCustos(t, "", "audit", "export", "--log", path, "--to", "3")
	if code, _, errOut := custos(t, head, "audit", "verify", "--file", "-"); code != 1 || !strings.Contains(errOut, "removed") {
		t.Errorf("export ending redacted: exit %d, %q", code, errOut)
	}
	if out := mustCustos(t, head, "audit", "verify", "--file", "-", "--partial"); !strings.Contains(out, "OK: 3 records (2 redacted)") {
		t.Errorf("--partial: %q", out)
	}

	// A tampered export.
	bad := strings.Replace(export, `"msg-0005"`, `"msg-9999"`, 1)
	code, out, errOut := custos(t, bad, "audit", "verify", "--file", "-")
	if code != 1 || out != "" || !strings.Contains(errOut, "record 5 altered") {
		t.Errorf("tampered export: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestAuditTamper(t *testing.T) {
	tests := []struct {
		name string
		sql  string
		want string
	}{
		{"alter", `UPDATE audit_records SET json = json_set(json, '$.outcome', 'denied') WHERE seq = 3`, "record 3 altered"},
		{"delete", `DELETE FROM audit_records WHERE seq = 2`, "record 2 removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := auditFixture(t, 5)
			auditSQL(t, path, dropAuditTriggers, tt.sql)
			code, out, errOut := custos(t, "", "audit", "verify", "--log", path)
			if code != 1 || out != "" || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "does not verify") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming %q", code, out, errOut, tt.want)
			}
			code, out, _ = custos(t, "", "audit", "verify", "--log", path, "--json")
			var rep audit.Report
			if err := json.Unmarshal([]byte(out), &rep); code != 1 || err != nil || rep.Problem == nil {
				t.Errorf("--json: exit %d, %q", code, out)
			}
		})
	}
}

func TestAuditAnchor(t *testing.T) {
	path := auditFixture(t, 5)
	anchor := filepath.Join(t.TempDir(), "anchor.json")
	out := mustCustos(t, "", "audit", "verify", "--log", path, "--save-anchor", anchor)
	if !strings.Contains(out, "anchor seq 5 saved") {
		t.Errorf("stdout %q", out)
	}
	fi, err := os.Stat(anchor)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("anchor file: %v, %v", fi, err)
	}
	var a audit.Anchor
	if data, _ := os.ReadFile(anchor); json.Unmarshal(data, &a) != nil || a.Seq != 5 || !isSHA256Digest(a.Hash) {
		t.Fatalf("anchor %+v", a)
	}

	// The log grows: the old anchor still holds, and the new one replaces it.
	auditAppend(t, path, 6, 7)
	out = mustCustos(t, "", "audit", "verify", "--log", path, "--anchor", anchor, "--save-anchor", anchor)
	if !strings.Contains(out, "OK: 7 records") || !strings.Contains(out, "1 anchor held") || !strings.Contains(out, "anchor seq 7 saved") {
		t.Errorf("stdout %q", out)
	}

	// Cutting the last records off leaves a chain that verifies alone but
	// not against the anchor.
	auditSQL(t, path, dropAuditTriggers, `DELETE FROM audit_records WHERE seq >= 6`)
	mustCustos(t, "", "audit", "verify", "--log", path)
	code, out, errOut := custos(t, "", "audit", "verify", "--log", path, "--anchor", anchor, "--save-anchor", anchor)
	if code != 1 || out != "" || !strings.Contains(errOut, "record 7 removed") || !strings.Contains(errOut, "anchored record 7") {
		t.Errorf("truncated: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if data, _ := os.ReadFile(anchor); json.Unmarshal(data, &a) != nil || a.Seq != 7 {
		t.Errorf("a failed verify replaced the anchor: %s", data)
	}

	// The anchor also checks an export.
	export := mustCustos(t, "", "audit", "export", "--log", path)
	if code, _, errOut := custos(t, export, "audit", "verify", "--file", "-", "--anchor", anchor); code != 1 || !strings.Contains(errOut, "anchored record 7") {
		t.Errorf("export against anchor: exit %d, %q", code, errOut)
	}

	// Bad anchor files.
	bad := filepath.Join(t.TempDir(), "bad.json")
	for _, content := range []string{`{"seq":0,"hash":"sha256:00"}`, `{"seq":1,"hash":"md5:x"}`, `not json`, `{"seq":1,"hash":"` + a.Hash + `","x":1}`} {
		if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := custos(t, "", "audit", "verify", "--log", path, "--anchor", bad); code != 1 || !strings.Contains(errOut, "not an anchor file") {
			t.Errorf("%s: exit %d, %q", content, code, errOut)
		}
	}
	if code, _, _ := custos(t, "", "audit", "verify", "--log", path, "--anchor", filepath.Join(t.TempDir(), "none.json")); code != 1 {
		t.Errorf("missing anchor file: exit %d", code)
	}
}

func TestAuditMissingLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "audit.db")
	for _, args := range [][]string{
		{"audit", "verify", "--log", path},
		{"audit", "export", "--log", path},
		{"audit", "purge", "--log", path},
		{"audit", "verify", "--log", dir}, // a directory without audit.db
	} {
		code, out, errOut := custos(t, "", args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "no audit log at ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("a missing log's directory was created: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files created in %s: %v", dir, entries)
	}

	// The default location, in an empty data directory.
	data := t.TempDir()
	t.Setenv("CUSTOS_DATA", data)
	t.Setenv("CUSTOS_AUDIT_LOG", "")
	if code, _, errOut := custos(t, "", "audit", "verify"); code != 1 || !strings.Contains(errOut, filepath.Join(data, "custos.db")+" (the data directory, $CUSTOS_DATA)") {
		t.Errorf("default: exit %d, %q", code, errOut)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Errorf("files created in the data directory: %v", entries)
	}

	// A file that is not an audit log.
	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, []byte("not a database, not at all, really not"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := custos(t, "", "audit", "verify", "--log", junk); code != 1 || out != "" {
		t.Errorf("junk file: exit %d, stdout %q", code, out)
	}

	// A missing export file.
	if code, _, _ := custos(t, "", "audit", "verify", "--file", filepath.Join(dir, "none.jsonl")); code != 1 {
		t.Errorf("missing export: exit %d", code)
	}
}

func TestAuditUsage(t *testing.T) {
	path := auditFixture(t, 3)
	for _, args := range [][]string{
		{"audit", "verify", "--nope"},
		{"audit", "verify", "extra"},
		{"audit", "verify", "--log", path, "--file", "x.jsonl"},
		{"audit", "verify", "--log", path, "--partial"},
		{"audit", "export", "--log", path, "--from", "x"},
		{"audit", "export", "--log", path, "--from", "5", "--to", "2"},
		{"audit", "export", "--log", path, "--to", "-1"},
		{"audit", "purge", "--log", path, "now"},
		{"audit", "nope"},
	} {
		if code, out, errOut := custos(t, "", args...); code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2", args, code, out, errOut)
		}
	}
}
