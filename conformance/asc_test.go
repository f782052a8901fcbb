package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sharedASC = "../../shared/conformance/asc/extracted"

// TestASCUpstreamCorpus runs the upstream examples when the shared corpus is
// present.
func TestASCUpstreamCorpus(t *testing.T) {
	if _, err := os.Stat(sharedASC); err != nil {
		t.Skip("shared ASC corpus not present:", err)
	}
	r, err := ASC(sharedASC)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Text())
	if r.Failed != 0 {
		t.Errorf("%d files failed", r.Failed)
	}
	if len(r.Files) != 23 {
		t.Errorf("%d files, want 23", len(r.Files))
	}
	envelopes := []string{
		"README/01-minimum-envelope-human-approval.json",
		"agent-status-codes/01-full-envelope-rate-limited-v1.0.0-draft.json",
		"docs/examples/01-human-approval-required-task.json",
		"docs/get-started/implementation/01-minimum-envelope-rate-limited.json",
		"docs/spec/envelope/01-minimum-envelope-rate-limited.json",
		"docs/spec/envelope/02-full-envelope-rate-limited.json",
	}
	for _, path := range envelopes {
		res, ok := r.Result(path)
		if !ok || res.Kind != KindEnvelope || res.Outcome != Passed {
			t.Errorf("%s: %+v", path, res)
		}
	}
	var n int
	for _, f := range r.Files {
		if f.Kind == KindEnvelope {
			n++
		}
	}
	if n != len(envelopes) {
		t.Errorf("%d files recognised as complete envelopes, want %d", n, len(envelopes))
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestASCOwnCorpus(t *testing.T) {
	dir := t.TempDir()
	const status = `"status":{"code":5001,"name":"RATE_LIMITED","kind":"status","scope":"tool_call","terminal":false}`
	files := []struct {
		name    string
		content string
		kind    Kind
		outcome Outcome
	}{
		{"good.json", `{"spec_version":"0.1.0",` + status + `,"occurred_at":"2026-08-08T12:00:00Z"}`, KindEnvelope, Passed},
		{"warn.json", `{"spec_version":"1.0.0",` + status + `,"occurred_at":"2026-08-08T12:00:00Z","details":{"x":1}}`, KindEnvelope, Passed},
		{"bad/mismatch.json", `{"spec_version":"0.1.0","status":{"code":5001,"name":"TIMEOUT","kind":"status","scope":"tool_call","terminal":false},"occurred_at":"2026-08-08T12:00:00Z"}`, KindEnvelope, Failed},
		{"bad/duplicate.json", `{"spec_version":"0.1.0","spec_version":"0.1.0",` + status + `,"occurred_at":"2026-08-08T12:00:00Z"}`, KindNotJSON, Failed},
		{"not-json.json", `this is not JSON`, KindNotJSON, Failed},
		{"fragments/partial.json", `{` + status + `}`, KindPartialEnvelope, Skipped},
		{"fragments/retry.json", `{"retry":{"retryable":true,"safe":true,"side_effect_state":"none"}}`, KindRetryFragment, Passed},
		{"fragments/retry-bad.json", `{"retry":{"retryable":true,"side_effect_state":"perhaps"}}`, KindRetryFragment, Failed},
		{"fragments/confidence.json", `{"metric":"groundedness","value":0.8,"method":"m"}`, KindConfidence, Passed},
		{"fragments/confidence-bare.json", `{"confidence":0.8}`, KindConfidence, Failed},
		{"fragments/details.json", `{"details":{"org.example.x":{}}}`, KindDetailsFragment, Passed},
		{"fragments/status.json", `{"code":3002,"name":"HUMAN_APPROVAL_REQUIRED","scope":"task","terminal":false}`, KindStatusObject, Passed},
		{"fragments/auth.json", `{"issuer":"a","integrity":{"method":"detached_signature"}}`, KindAuthenticity, Passed},
		{"fragments/children.json", `[{"code":2000,"name":"SUCCESS","scope":"tool_call"},{"code":4002,"name":"PERMISSION_DENIED"}]`, KindChildOutcomes, Passed},
		{"fragments/condition.json", `{"status":{"code":7003,"name":"HALLUCINATION_DETECTED","kind":"condition","scope":"artefact","terminal":false}}`, KindConditionFragment, Passed},
		{"bindings/problem.json", `{"type":"urn:agent-status:RATE_LIMITED","status":429,"agent_status":{"code":5001,"name":"RATE_LIMITED","scope":"tool_call","terminal":false}}`, KindProblemDetails, Passed},
		{"bindings/problem-bad.json", `{"type":"urn:agent-status:TIMEOUT","status":429,"agent_status":{"code":5001,"name":"RATE_LIMITED","scope":"tool_call","terminal":false}}`, KindProblemDetails, Failed},
		{"bindings/mcp.json", `{"content":[{"type":"resource","resource":{"mimeType":"application/agent-status+json","text":"{\"code\":4002,\"name\":\"PERMISSION_DENIED\",\"scope\":\"tool_call\"}"}}],"isError":true}`, KindMCPToolResult, Passed},
		{"other/unknown.json", `{"hello":"world"}`, KindUnrecognised, Skipped},
		{"other/scalar.json", `42`, KindUnrecognised, Skipped},
	}
	for _, f := range files {
		write(t, dir, f.name, f.content)
	}
	write(t, dir, "ignored.txt", "not a json file")

	r, err := ASC(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Files) != len(files) {
		t.Fatalf("%d results, want %d", len(r.Files), len(files))
	}
	var pass, fail, skip int
	for _, f := range files {
		res, ok := r.Result(f.name)
		if !ok {
			t.Errorf("%s: no result", f.name)
			continue
		}
		if res.Kind != f.kind || res.Outcome != f.outcome {
			t.Errorf("%s: %s/%s (%s), want %s/%s", f.name, res.Kind, res.Outcome, res.Reason, f.kind, f.outcome)
		}
		switch f.outcome {
		case Passed:
			pass++
		case Failed:
			fail++
		default:
			skip++
		}
	}
	if r.Passed != pass || r.Failed != fail || r.Skipped != skip {
		t.Errorf("counts %d/%d/%d, want %d/%d/%d", r.Passed, r.Failed, r.Skipped, pass, fail, skip)
	}
	want := "asc conformance: 11 passed, 6 failed, 3 skipped"
	if r.String() != want {
		t.Errorf("String() = %q, want %q", r.String(), want)
	}
	if !strings.HasSuffix(r.Text(), want+"\n") {
		t.Error("Text does not end with the summary")
	}
	if res, _ := r.Result("fragments/partial.json"); !strings.Contains(res.Reason, "spec_version") {
		t.Errorf("skip reason %q", res.Reason)
	}
}

func TestASCMissingDir(t *testing.T) {
	if _, err := ASC(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("no error for a missing directory")
	}
}
