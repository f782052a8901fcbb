package filestore_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/liveness"
	"github.com/custos-runtime/custos/store/filestore"
)

func envelope(t *testing.T, h aais.Header, p aais.Payload) (string, *aais.Message) {
	t.Helper()
	m, err := aais.NewMessage(h, p)
	if err != nil {
		t.Fatal(err)
	}
	return wire(t, m), m
}

// TestPythonLayout opens a document as the Python reference library writes
// it (§11.2): no Custos extensions, resolved requests only in the event
// log, decision envelopes in "decisions", owners with and without start
// time.
func TestPythonLayout(t *testing.T) {
	const stream = "test.approvals"
	reqP, reqR := newRequest(t, "apr_p"), newRequest(t, "apr_r")
	evP, _ := envelope(t, aais.Header{ID: "evt_1", OccurredAt: t0, Sequence: 1, Stream: stream}, reqP)
	evR, _ := envelope(t, aais.Header{ID: "evt_2", OccurredAt: t0, Sequence: 2, Stream: stream}, reqR)
	dec := newDecision(t, reqR, aais.Deny, "dec_r")
	decEv, _ := envelope(t, aais.Header{ID: "evt_d", OccurredAt: t0.Add(time.Minute), Sequence: 1, Stream: stream + ".presenter"}, dec)
	res, err := aais.NewResolution(aais.ResolutionParams{ID: "res_r", Request: reqR, Decision: dec, Outcome: aais.OutcomeDenied, ResolvedAt: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	resEv, receipt := envelope(t, aais.Header{ID: "evt_3", OccurredAt: t0.Add(time.Minute), Sequence: 3, Stream: stream}, res)
	doc := `{"compacted_through":0,"decisions":{"apr_r":` + decEv + `},"events":[` + evP + `,` + evR + `,` + resEv + `],` +
		`"extensions":{"grants":{"x":[1,2.5,null,true,"\u00e9"]}},` +
		`"owners":{"apr_p":{"host_id":"host-elsewhere","pid":4242,"process_start_time":1790000000.12},"apr_r":77},` +
		`"pending":{"apr_p":` + evP + `},"presenter_sequence":1,"resolutions":{"apr_r":` + resEv + `},` +
		`"schema":"aais.store.v1","sequence":3,"store_id":"0123abcd","x-note":"kept"}`
	path := filepath.Join(t.TempDir(), "approvals.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, &filestore.Options{Now: fixedNow})
	a := authority(t, s)
	ctx := t.Context()

	if id, err := s.ID(ctx); err != nil || id != "0123abcd" {
		t.Fatalf("ID = %q, %v", id, err)
	}
	st, err := s.RequestState(ctx, "apr_p")
	if err != nil || !st.Pending() {
		t.Fatalf("RequestState(apr_p) = %v", err)
	}
	if o := st.Request.Owner; o == nil || *o != (aais.ProcessIdentity{PID: 4242, StartTime: 1790000000.12, HostID: "host-elsewhere"}) {
		t.Fatalf("owner = %+v", o)
	}
	pending, asOf, err := s.Pending(ctx)
	if err != nil || len(pending) != 1 || asOf != 3 || pending[0].Owner == nil {
		t.Fatalf("Pending = %d as of %d, %v", len(pending), asOf, err)
	}
	// The fingerprint is the one the authority computes: creating the same
	// request again is a no-op, not a conflict.
	if ev, created, err := a.Create(ctx, reqP); err != nil || created || ev.Sequence != 1 {
		t.Fatalf("Create(same request) = %v, %v", created, err)
	}
	st, err = s.RequestState(ctx, "apr_r")
	if err != nil || st.Pending() || wire(t, st.Resolution.Event) != resEv || st.Request.Event.Request.ID != "apr_r" {
		t.Fatalf("RequestState(apr_r) = %+v, %v", st, err)
	}
	if o := st.Request.Owner; o == nil || *o != (aais.ProcessIdentity{PID: 77, HostID: liveness.HostID()}) {
		t.Fatalf("legacy owner = %+v", st.Request.Owner)
	}
	// The decision recorded by the other library is recognised as a replay.
	m, err := a.Decide(ctx, dec, actor, nil)
	if err != nil || wire(t, m) != wire(t, receipt) {
		t.Fatalf("replay of the recorded decision = %v; want the stored receipt", err)
	}
	ev := create(t, a, "apr_new")
	if ev.Sequence != 4 {
		t.Fatalf("new request sequence %d, want 4", ev.Sequence)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), `{"compacted_through":0,"decisions":{"apr_r":`) || strings.Contains(string(raw), "\n") {
		t.Fatalf("not sorted compact JSON: %.80s", raw)
	}
	var got struct {
		Schema      string                     `json:"schema"`
		Sequence    uint64                     `json:"sequence"`
		Pending     map[string]json.RawMessage `json:"pending"`
		Resolutions map[string]json.RawMessage `json:"resolutions"`
		Decisions   map[string]json.RawMessage `json:"decisions"`
		Owners      map[string]json.RawMessage `json:"owners"`
		Events      []json.RawMessage          `json:"events"`
		Extensions  map[string]json.RawMessage `json:"extensions"`
		Note        string                     `json:"x-note"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Schema != filestore.Schema || got.Sequence != 4 || len(got.Pending) != 2 || got.Pending["apr_r"] != nil ||
		len(got.Resolutions) != 1 || len(got.Decisions) != 1 || len(got.Events) != 4 || got.Note != "kept" {
		t.Fatalf("written document: %s", raw)
	}
	if g := string(got.Extensions["grants"]); g != `{"x":[1,2.5,null,true,"\u00e9"]}` {
		t.Fatalf("foreign extension changed: %s", g)
	}
	if string(got.Owners["apr_r"]) != "77" {
		t.Fatalf("legacy owner rewritten: %s", got.Owners["apr_r"])
	}
	for _, k := range []string{filestore.ExtFingerprints, filestore.ExtResolvedRequests} {
		if got.Extensions[k] == nil {
			t.Fatalf("extension %s missing", k)
		}
	}
	if string(got.Pending["apr_new"]) != wire(t, ev) {
		t.Fatal("the envelope is not stored as aais.Marshal wrote it")
	}
}
