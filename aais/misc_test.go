package aais

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

func TestValidationErrorText(t *testing.T) {
	d := reqDoc(t)
	set(t, d, "/request/action_digest", "sha256:"+strings.Repeat("0", 64))
	cs := get(t, d, "/request/choices").([]any)
	set(t, d, "/request/choices", cs[:1])
	_, err := Parse(encodeDoc(t, d))
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Issues) != 2 || !ve.Has(RuleActionDigest) || !ve.Has(RuleExitChoice) || ve.Has(RuleExpiry) {
		t.Fatalf("%v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "aais: invalid message: /request/action_digest: action_digest: ") || !strings.HasSuffix(msg, "(and 1 more issue)") {
		t.Errorf("Error() = %q", msg)
	}
	if s := (Issue{Rule: RuleType, Message: "m"}).String(); s != "(document): type: m" {
		t.Errorf("Issue.String() = %q", s)
	}
	if (&ValidationError{}).Error() != ErrInvalid.Error() {
		t.Error("empty ValidationError text")
	}
}

func TestEnumsValid(t *testing.T) {
	for _, ok := range []bool{
		TypeRequested.Valid(), TypeActivity.Valid(), !Type("approval.x").Valid(),
		Approve.Valid(), Cancel.Valid(), !Verdict("allow").Valid(), Deny.Exits(), !Approve.Exits(),
		ScopePersistent.Valid(), !Scope("forever").Valid(), ScopeSession.Bounded(), !ScopeOnce.Bounded(),
		OutcomeConflict.Valid(), !Outcome("done").Valid(),
	} {
		if !ok {
			t.Fatal("enum predicate wrong")
		}
	}
}

func TestPayloadJSON(t *testing.T) {
	m := mustParse(t, readFile(t, requestFixture))
	b, err := json.Marshal(m.Request)
	if err != nil || !strings.Contains(string(b), `"status":"pending"`) || !strings.Contains(string(b), `"action_digest":"`+fixtureDigest) {
		t.Errorf("request JSON %s %v", b, err)
	}
	d := mustParse(t, readFile(t, decisionFixture)).Decision
	if b, err := json.Marshal(*d); err != nil || !strings.Contains(string(b), `"request_id":"apr_shell_001"`) {
		t.Errorf("decision JSON %s %v", b, err)
	}
	res := mustParse(t, encodeDoc(t, resolutionDoc())).Resolution
	if b, err := json.Marshal(res); err != nil || !strings.Contains(string(b), `"effective_scope":"once"`) {
		t.Errorf("resolution JSON %s %v", b, err)
	}
	snap := &Snapshot{AsOfSequence: 3}
	if b, err := json.Marshal(snap); err != nil || string(b) != `{"as_of_sequence":3,"pending":[]}` {
		t.Errorf("snapshot JSON %s %v", b, err)
	}
	if b, err := json.Marshal(m.Request.CreatedAt); err != nil || string(b) != `"2026-08-30T18:00:00Z"` {
		t.Errorf("timestamp JSON %s %v", b, err)
	}
}

func TestActionAccessors(t *testing.T) {
	a, err := NewAction(json.RawMessage(`{"kind":"network.request","name":"http.post","summary":"Post the report",
		"arguments":{"url":"https://example.org/r","body":{"n":1}},"resource":"https://example.org/r"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Kind() != "network.request" || a.Name() != "http.post" || a.Summary() != "Post the report" ||
		string(a.Arguments()) != `{"url":"https://example.org/r","body":{"n":1}}` || a.Resource() != "https://example.org/r" ||
		a.WorkingDirectory() != "" || a.Effects() != nil || a.Presentation() != nil || a.Redacted() {
		t.Errorf("accessors: %s", a.Raw())
	}
	// Copies: changing what an accessor returned does not change the action.
	args := a.Arguments()
	args[0] = '['
	raw := a.Raw()
	raw[0] = '['
	if !a.Equal(mustAction(t, string(a.Raw()))) || a.Arguments()[0] != '{' {
		t.Error("accessors leak the action's bytes")
	}
}

func mustAction(t *testing.T, raw string) Action {
	t.Helper()
	a, err := NewAction(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDecisionBodyFingerprint: a parsed decision re-encodes to the same JSON
// value as the body received, so an authority can fingerprint decisions
// (idempotent replay) from the typed value.
func TestDecisionBodyFingerprint(t *testing.T) {
	d := decDoc(t)
	set(t, d, "/decision/decided_at", "2026-08-30T20:01:00.000+02:00")
	set(t, d, "/decision/extensions", map[string]any{"com.example/ui": map[string]any{"v": json.Number("1.0"), "x": []any{}}})
	data := encodeDoc(t, d)
	m := mustParse(t, data)
	body, _ := json.Marshal(get(t, d, "/decision"))
	want, err := jcs.Digest(body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m.Decision)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := jcs.Digest(b); got != want {
		t.Errorf("fingerprint %s, want %s\n%s", got, want, b)
	}
}
