package pgstore

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
)

// The JSON finish stores is aais.Marshal's, byte for byte, at every
// sequence length, for requests and resolutions, whatever the action
// holds (here a member named "sequence" with the template's own value).
func TestTemplateIsMarshal(t *testing.T) {
	now := aaistest.Start
	r := aaistest.Request(t, now, "t1")
	var err error
	// An action with a member the template must not take for the
	// message's sequence.
	p := aais.RequestParams{ID: r.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour), Origin: r.Origin,
		Action: json.RawMessage(`{"kind":"process.exec","name":"shell.exec","summary":"Check",` +
			`"arguments":{"sequence":9007199254740991},"working_directory":"/w","effects":["none"]}`), Risk: r.Risk, Choices: r.Choices}
	if r, err = aais.NewRequest(p); err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	req, err := aais.NewMessage(aais.Header{OccurredAt: now, Stream: "test"}, r)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := aais.NewResolution(aais.ResolutionParams{Request: r, Outcome: aais.OutcomeCancelled, ResolvedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := aais.NewMessage(aais.Header{OccurredAt: now, Stream: "s"}, rp)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*aais.Message{req, res} {
		tpl, err := template(m, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range []uint64{1, 9, 10, 99, 12345, 1 << 32, aais.MaxSequence - 1, aais.MaxSequence} {
			c := *m
			c.Sequence = seq
			want, err := aais.Marshal(&c)
			if err != nil {
				t.Fatal(err)
			}
			if got := tpl.json(seq); !bytes.Equal(got, want) {
				t.Fatalf("%s at %d:\n%s\nwant\n%s", m.Type, seq, got, want)
			}
		}
		if !bytes.HasSuffix(tpl.pre, []byte(`,"sequence":`)) || bytes.Count(tpl.pre, []byte(`"sequence"`)) != 1 {
			t.Fatalf("template split at the wrong place: %q | %q", tpl.pre, tpl.suf)
		}
	}
}
