package aais_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/aais"
)

// SetSequence on Marshal's output equals Marshal with the sequence set, for
// every message type and sequences of every width.
func TestSetSequence(t *testing.T) {
	var msgs []*aais.Message
	for _, name := range []string{"shell-approval.json", "approve-once.json"} {
		msgs = append(msgs, readFixture(t, name))
	}
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := aais.Parse(b); err == nil {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) < 3 {
		t.Fatalf("only %d messages to test with", len(msgs))
	}
	for _, m := range msgs {
		for _, seq := range []uint64{0, 1, 9, 10, 41, 123456789, aais.MaxSequence} {
			c := *m
			c.Sequence = 0
			zero, err := aais.Marshal(&c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := aais.SetSequence(zero, seq)
			if err != nil {
				t.Fatalf("%s: SetSequence(%d): %v", m.Type, seq, err)
			}
			c.Sequence = seq
			want, err := aais.Marshal(&c)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s, sequence %d:\n got %s\nwant %s", m.Type, seq, got, want)
			}
		}
	}
	for _, bad := range []string{``, `{}`, `{"aais":"1.0","type":"x"}`, `{"aais":"1.0","type":"a\",\"sequence\":1}`,
		`{"aais":"1.0","type":"a","sequence":}`, `{"aais":"1.0","type":"a","sequence":1`} {
		if _, err := aais.SetSequence([]byte(bad), 1); !errors.Is(err, aais.ErrInvalid) {
			t.Errorf("SetSequence(%s) err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := aais.SetSequence([]byte(`{"aais":"1.0","type":"a","sequence":1}`), aais.MaxSequence+1); !errors.Is(err, aais.ErrInvalid) {
		t.Error("a sequence above MaxSequence was accepted")
	}
}
