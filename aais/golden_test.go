package aais

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// goldenMessages builds one message of each type with fixed times and a
// deterministic id source, as an authority would.
func goldenMessages(t *testing.T) map[string]*Message {
	t.Helper()
	o := &Options{Rand: &seqReader{}}
	p := shellParams()
	p.ID = ""
	req, err := o.NewRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	trapParams := shellParams()
	trapParams.ID = "apr_trap_001"
	trapParams.Action = json.RawMessage(`{"kind":"tool.call","name":"github.create_issue","summary":"Open an issue in octo-org/app",` +
		`"arguments":{"repo":"octo-org/app","title":"<b>Flaky</b> & slow","labels":[],"draft":false,"weight":1.50,"token_ref":"vault:gh/octo-org"},` +
		`"resource":"https://github.com/octo-org/app","effects":[],` +
		`"presentation":{"redacted":true,"binding_hint":"GitHub account octo-org (token omitted)","details":"Title: <b>Flaky</b> & slow"}}`)
	trapParams.Extensions = Extensions{"com.example/trace": json.RawMessage(`{"span":"a1","sampled":false}`)}
	trap, err := o.NewRequest(trapParams)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := o.NewDecision(req, DecisionParams{
		Decision: Approve, Scope: ScopeSession, DecidedAt: t1.Add(500 * time.Millisecond),
		Actor: Actor{ID: "user_alex", Type: ActorHuman, DisplayName: "Alex", AuthenticatedBy: "local-session"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.NewResolution(ResolutionParams{Request: req, Decision: dec, Outcome: OutcomeApproved, ResolvedAt: t1.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := o.NewResolution(ResolutionParams{Request: trap, Outcome: OutcomeExpired, ResolvedAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(h Header, p Payload) *Message {
		m, err := o.NewMessage(h, p)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return map[string]*Message{
		"request":          wrap(Header{OccurredAt: t0, Sequence: 1, Stream: "authority_1"}, req),
		"request-redacted": wrap(Header{OccurredAt: t0, Sequence: 2, Stream: "authority_1"}, trap),
		"activity":         wrap(Header{OccurredAt: t0.Add(30 * time.Second), Sequence: 3, Stream: "authority_1"}, &Activity{RequestID: req.ID, Message: "Waiting for a reviewer", Stage: "waiting"}),
		"snapshot":         wrap(Header{OccurredAt: t1, Sequence: 3, Stream: "authority_1"}, &Snapshot{AsOfSequence: 3, Pending: []Request{*req, *trap}}),
		"decision":         wrap(Header{OccurredAt: t1, Sequence: 1, Stream: "presenter_alex"}, dec),
		"resolution":       wrap(Header{OccurredAt: t1.Add(time.Second), Sequence: 4, Stream: "authority_1"}, res),
		"resolution-expired": wrap(Header{OccurredAt: t0.Add(time.Hour), Sequence: 5, Stream: "authority_1",
			Extensions: Extensions{"https://example.org/aais/audit": json.RawMessage(`{"entry":17}`)}}, expired),
	}
}

func TestGolden(t *testing.T) {
	msgs := goldenMessages(t)
	msgs["shell-approval.marshalled"] = mustParse(t, readFile(t, requestFixture))
	msgs["approve-once.marshalled"] = mustParse(t, readFile(t, decisionFixture))
	for name, m := range msgs {
		t.Run(name, func(t *testing.T) {
			got := append(mustMarshal(t, m), '\n')
			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readFile(t, path)
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs (run go test -update)\n got %s\nwant %s", path, got, want)
			}
			// The golden bytes are themselves a valid, stable message.
			again := mustParse(t, bytes.TrimSuffix(want, []byte("\n")))
			if b := append(mustMarshal(t, again), '\n'); !bytes.Equal(b, want) {
				t.Errorf("%s does not re-marshal to itself", path)
			}
		})
	}
}
