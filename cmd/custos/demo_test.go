package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The demo with --approve approves the request itself and prints no
// manual steps; the reviewer it names is the one the decision records;
// the ASC column is explained; and it offers audit verify only on a data
// directory it keeps, where the printed command works.
func TestDemoApprove(t *testing.T) {
	for _, keep := range []bool{false, true} {
		args := []string{"demo", "--approve"}
		data := ""
		if keep {
			data = filepath.Join(t.TempDir(), "demo-data")
			args = append(args, "--data", data)
		}
		code, out, errOut := custos(t, "", args...)
		if code != 0 {
			t.Fatalf("demo: exit %d, %s\n%s", code, errOut, out)
		}
		for _, absent := range []string{"Waiting for your decision", "another terminal", "approve apr_", "demo reviewer"} {
			if strings.Contains(out, absent) {
				t.Errorf("keep %v: --approve printed %q:\n%s", keep, absent, out)
			}
		}
		words := strings.Join(strings.Fields(out), " ") // the table's columns, one space apart
		for _, want := range []string{"signed in with the login token (reviewer admin)", "approval_decision: approved by admin",
			"approval payments.transfer EU-AI-ACT-HIGH-RISK required_before_execution approved admin 2000",
			"ASC codes: 1000 ACCEPTED, 2000 SUCCESS", "status explain CODE says what it means"} {
			if !strings.Contains(words, want) {
				t.Errorf("keep %v: no %q:\n%s", keep, want, out)
			}
		}
		if !keep {
			if strings.Contains(out, "audit verify") || !strings.Contains(out, "removed now (--keep keeps it)") {
				t.Errorf("a removed directory: %s", out)
			}
			continue
		}
		line := regexp.MustCompile(`audit verify --data (\S+) checks`).FindStringSubmatch(out)
		if line == nil || line[1] != data {
			t.Fatalf("no audit verify line for %s:\n%s", data, out)
		}
		if _, err := os.Stat(data); err != nil {
			t.Fatal(err)
		}
		if v := mustCustos(t, "", "audit", "verify", "--data", line[1]); !strings.Contains(v, "OK: 7 records") {
			t.Errorf("audit verify: %s", v)
		}
	}
}
