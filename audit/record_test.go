package audit_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/jcs"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

// goldenRecord is a fixed, fully populated record.
func goldenRecord() audit.Record {
	return audit.Record{
		Seq:           42,
		Time:          time.Date(2026, 11, 30, 9, 47, 12, 123456789, time.UTC),
		Kind:          audit.KindApproval,
		MessageID:     "msg-7f3c",
		CorrelationID: "corr-19",
		Sender:        "did:web:agent-a.example",
		Recipient:     "did:web:agent-b.example",
		Capability:    "payments.transfer",
		PayloadHash:   "sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8",
		Profile:       "EU-AI-ACT-HIGH-RISK",
		Oversight:     string(compliance.OversightRequiredBeforeExecution),
		Actor:         audit.Actor{ID: "user_alex", Type: audit.ActorHuman, AuthenticatedBy: "local-session"},
		Outcome:       audit.OutcomeApproved,
		ASCCode:       2000,
		Status:        "ok",
		RequestID:     "req_01",
		ResolutionID:  "dec_01",
		TraceID:       "4bf92f3577b34da6a3ce929d0e0e4736",
		Details:       map[string]any{"rule": "r-1", "amount_cents": 1250, "note": "é <&> \u2028"},
		RetainUntil:   time.Date(2031, 11, 30, 9, 47, 12, 123456789, time.UTC),
		Prev:          "sha256:" + strings.Repeat("0f", 32),
	}
}

type golden struct {
	Comment   string `json:"comment"`
	Canonical string `json:"canonical"` // JCS of the record without hash
	Hash      string `json:"hash"`
	Stored    string `json:"stored"` // the stored / exported line
}

func TestGoldenHash(t *testing.T) {
	rec := goldenRecord()
	h, err := rec.ComputeHash()
	if err != nil {
		t.Fatal(err)
	}
	rec.Hash = h
	stored, err := rec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	noHash := rec
	noHash.Hash = ""
	canonical, err := noHash.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden.json")
	if *update {
		g := golden{Comment: "audit.Record known-answer vector: hash = sha256 of canonical (RFC 8785 form without the hash member); stored = canonical with hash",
			Canonical: string(canonical), Hash: h, Stored: string(stored)}
		data, err := json.MarshalIndent(g, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if string(canonical) != g.Canonical || h != g.Hash || string(stored) != g.Stored {
		t.Fatalf("golden vector changed:\ncanonical %s\nwant      %s\nhash %s want %s\nstored %s\nwant   %s",
			canonical, g.Canonical, h, g.Hash, stored, g.Stored)
	}
	// Independent recomputation from the stored line: remove "hash",
	// canonicalise with jcs, SHA-256. (Also checked with Python:
	// json.dumps(m, sort_keys=True, separators=(",", ":"),
	// ensure_ascii=False), which equals RFC 8785 for this record, gives the
	// same bytes and hash.)
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(g.Stored))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	delete(m, "hash")
	c, err := jcs.CanonicalizeValue(m)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != g.Hash || string(c) != g.Canonical {
		t.Fatalf("independent hash %s, canonical %s", got, c)
	}
	// The stored line parses back to the same record.
	back, err := audit.ParseRecord([]byte(g.Stored))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.MarshalJSON()
	if !bytes.Equal(again, stored) {
		t.Fatalf("round trip: %s", again)
	}
}

func TestParseRecordRejects(t *testing.T) {
	ok := `{"kind":"received","prev":"` + audit.Genesis + `","seq":1,"time":"2026-01-01T00:00:00.000000000Z"}`
	if _, err := audit.ParseRecord([]byte(ok)); err != nil {
		t.Fatalf("valid record: %v", err)
	}
	tests := []struct{ name, in string }{
		{"empty", ``},
		{"not an object", `[]`},
		{"unknown member", strings.Replace(ok, `"kind"`, `"extra":1,"kind"`, 1)},
		{"duplicate member", strings.Replace(ok, `"kind":"received"`, `"kind":"received","kind":"purge"`, 1)},
		{"time without nanoseconds", strings.Replace(ok, `.000000000Z`, `Z`, 1)},
		{"time with offset", strings.Replace(ok, `.000000000Z`, `.000000000+00:00`, 1)},
		{"time not a string", strings.Replace(ok, `"2026-01-01T00:00:00.000000000Z"`, `0`, 1)},
		{"missing time", strings.Replace(ok, `,"time":"2026-01-01T00:00:00.000000000Z"`, ``, 1)},
		{"bad retain_until", strings.Replace(ok, `"seq":1`, `"retain_until":"tomorrow","seq":1`, 1)},
		{"negative seq", strings.Replace(ok, `"seq":1`, `"seq":-1`, 1)},
		{"fractional seq", strings.Replace(ok, `"seq":1`, `"seq":1.5`, 1)},
		{"huge integer", strings.Replace(ok, `"seq":1`, `"seq":1,"asc_code":9007199254740993`, 1)},
		{"trailing data", ok + ` {}`},
		{"member name in another case", strings.Replace(ok, `"kind"`, `"Kind"`, 1)},
		{"case-variant duplicate", strings.Replace(ok, `"kind":"received"`, `"kind":"received","KIND":"purge"`, 1)},
		{"zero time", strings.Replace(ok, `2026-01-01`, `0001-01-01`, 1)},
		{"arsia unknown member", strings.Replace(ok, `"kind"`, `"arsia":{"record_Id":"x"},"kind"`, 1)},
		{"actor unknown member", strings.Replace(ok, `"kind"`, `"actor":{"id":"a","role":"x"},"kind"`, 1)},
		{"invalid utf-8", strings.Replace(ok, `received`, "rec\xffeived", 1)},
		{"too big", strings.Replace(ok, `"kind"`, `"details":{"x":"`+strings.Repeat("a", audit.MaxRecordSize)+`"},"kind"`, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := audit.ParseRecord([]byte(tc.in)); !errors.Is(err, audit.ErrRecord) {
				t.Fatalf("ParseRecord: %v, want ErrRecord", err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	rec := goldenRecord()
	rec.Hash = "sha256:" + strings.Repeat("11", 32)
	red := rec.Redact()
	want := audit.Record{Seq: rec.Seq, Time: rec.Time, Kind: rec.Kind, RetainUntil: rec.RetainUntil,
		Redacted: true, Prev: rec.Prev, Hash: rec.Hash}
	got, _ := red.MarshalJSON()
	exp, _ := want.MarshalJSON()
	if !bytes.Equal(got, exp) {
		t.Fatalf("Redact: %s, want %s", got, exp)
	}
	if !strings.Contains(string(got), `"redacted":true`) {
		t.Fatalf("no redacted marker: %s", got)
	}
}

func TestPayloadHash(t *testing.T) {
	a, err := audit.PayloadHash([]byte(`{"b":1,"a":[true,null]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := audit.PayloadHashValue(map[string]any{"a": []any{true, nil}, "b": 1})
	if err != nil || a != b || !jcs.IsDigest(a) {
		t.Fatalf("PayloadHash %s, PayloadHashValue %s, %v", a, b, err)
	}
}
