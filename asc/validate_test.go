package asc

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(e *Envelope)
		path  string
		rule  string
		level Level
		err   error
	}{
		{"name mismatch", func(e *Envelope) { e.Status.Name = "TIMEOUT" }, "/status/name", RuleNameMismatch, LevelError, ErrNameMismatch},
		{"registered name on extension code", func(e *Envelope) { e.Status.Code = 9001 }, "/status/name", RuleNameMismatch, LevelError, ErrNameMismatch},
		{"name with digits ok but lower case", func(e *Envelope) { e.Status.Code, e.Status.Name = 9001, "Org_X" }, "/status/name", RuleNameFormat, LevelError, ErrInvalid},
		{"code zero", func(e *Envelope) { e.Status.Code = 0 }, "/status/code", RuleRequired, LevelError, ErrInvalid},
		{"code 8xxx as status", func(e *Envelope) { e.Status.Code, e.Status.Name = PromptCacheHit, "PROMPT_CACHE_HIT" }, "/status/kind", RuleEventOnly, LevelError, ErrEventOnly},
		{"reserved code", func(e *Envelope) { e.Status.Code, e.Status.Name = 9999, "X" }, "/status/code", RuleCodeReserved, LevelError, ErrReservedCode},
		{"kind missing", func(e *Envelope) { e.Status.Kind = "" }, "/status/kind", RuleRequired, LevelError, ErrInvalid},
		{"scope missing", func(e *Envelope) { e.Status.Scope = "" }, "/status/scope", RuleRequired, LevelError, ErrInvalid},
		{"scope with space", func(e *Envelope) { e.Status.Scope = "org.example thing" }, "/status/scope", RuleScope, LevelError, ErrInvalid},
		{"scope trailing dot", func(e *Envelope) { e.Status.Scope = "org." }, "/status/scope", RuleScope, LevelError, ErrInvalid},
		{"spec_version missing", func(e *Envelope) { e.SpecVersion = "" }, "/spec_version", RuleRequired, LevelError, ErrInvalid},
		{"spec_version leading zero", func(e *Envelope) { e.SpecVersion = "0.01.0" }, "/spec_version", RuleSpecVersion, LevelError, ErrInvalid},
		{"spec_version 1.0.0 warns", func(e *Envelope) { e.SpecVersion = "1.0.0" }, "/spec_version", RuleSpecVersionUnknown, LevelWarning, nil},
		{"occurred_at lower-case z", func(e *Envelope) { e.OccurredAt = "2026-08-08T12:00:00z" }, "/occurred_at", RuleTimestamp, LevelError, ErrInvalid},
		{"occurred_at offset without colon", func(e *Envelope) { e.OccurredAt = "2026-08-08T12:00:00+0200" }, "/occurred_at", RuleTimestamp, LevelError, ErrInvalid},
		{"phase FINISHED not terminal", func(e *Envelope) { e.Status.Phase = PhaseFinished }, "/status/phase", RulePhaseTerminal, LevelWarning, nil},
		{"terminal while EXECUTING", func(e *Envelope) { e.Status.Terminal, e.Status.Phase = true, PhaseExecuting }, "/status/phase", RulePhaseTerminal, LevelWarning, nil},
		{"class disagrees", func(e *Envelope) { e.Status.Class = ClassSuccess }, "/status/class", RuleClassMismatch, LevelWarning, nil},
		{"details not namespaced", func(e *Envelope) { e.Details = map[string]any{"remaining": 0} }, "/details/remaining", RuleDetailsNamespace, LevelWarning, nil},
		{"details key with slash escaped", func(e *Envelope) { e.Details = map[string]any{"a/b": 0} }, "/details/a~1b", RuleDetailsNamespace, LevelWarning, nil},
		{"trace id", func(e *Envelope) { e.Provenance = &Provenance{TraceID: "xyz"} }, "/provenance/trace_id", RuleTraceID, LevelError, ErrInvalid},
		{"span id upper case", func(e *Envelope) { e.Provenance = &Provenance{SpanID: "B7AD6B7169203331"} }, "/provenance/span_id", RuleSpanID, LevelError, ErrInvalid},
		{"confidence no metric", func(e *Envelope) { e.Confidence = &Confidence{Value: 0.5, Method: "m"} }, "/confidence/metric", RuleConfidence, LevelError, ErrInvalid},
		{"confidence NaN", func(e *Envelope) { e.Confidence = &Confidence{Metric: "m", Value: math.NaN(), Method: "m"} }, "/confidence/value", RuleConfidence, LevelError, ErrInvalid},
		{"confidence range inverted", func(e *Envelope) {
			e.Confidence = &Confidence{Metric: "m", Value: 0.5, Method: "m", Range: &ConfidenceRange{Minimum: 1, Maximum: 0}}
		}, "/confidence/range", RuleConfidenceRange, LevelError, ErrInvalid},
		{"confidence outside range", func(e *Envelope) {
			e.Confidence = &Confidence{Metric: "m", Value: 2, Method: "m", Range: &ConfidenceRange{Minimum: 0, Maximum: 1}}
		}, "/confidence/value", RuleConfidenceRange, LevelWarning, nil},
		{"side effect state", func(e *Envelope) { e.Retry = &Retry{SideEffectState: "some"} }, "/retry/side_effect_state", RuleSideEffectState, LevelError, ErrInvalid},
		{"deadline", func(e *Envelope) { e.Retry = &Retry{Deadline: "2026-08-08 12:00:00Z"} }, "/retry/deadline", RuleTimestamp, LevelError, ErrInvalid},
		{"negative attempt", func(e *Envelope) { e.Retry = &Retry{Attempt: -1} }, "/retry/attempt", RuleRetryNumbers, LevelError, ErrInvalid},
		{"attempt beyond max", func(e *Envelope) { e.Retry = &Retry{Attempt: 6, MaxAttempts: 5} }, "/retry/attempt", RuleRetryAttempts, LevelWarning, nil},
		{"6005 declared safe", func(e *Envelope) {
			e.Status.Code, e.Status.Name, e.Status.Terminal = ResultStateUnknown, "RESULT_STATE_UNKNOWN", true
			e.Retry = &Retry{Retryable: true, Safe: true}
		}, "/retry/safe", RuleRetryUnknownResult, LevelWarning, nil},
		{"remediation without action", func(e *Envelope) { e.Remediation = []Remediation{{Action: "retry"}, {}} }, "/remediation/1/action", RuleRemediationAction, LevelError, ErrInvalid},
		{"integrity without method", func(e *Envelope) { e.Integrity = &Integrity{KeyID: "k"} }, "/integrity/method", RuleIntegrity, LevelError, ErrInvalid},
		{"event kind", func(e *Envelope) {
			e.Events = []Event{{Code: RetryAttempted, Name: "RETRY_ATTEMPTED", Kind: KindStatus, OccurredAt: FormatTime(t0)}}
		}, "/events/0/kind", RuleEventKind, LevelError, ErrInvalid},
		{"event time", func(e *Envelope) { e.Events = []Event{NewEvent(RetryAttempted, t0)}; e.Events[0].OccurredAt = "now" }, "/events/0/occurred_at", RuleTimestamp, LevelError, ErrInvalid},
		{"event name", func(e *Envelope) {
			e.Events = []Event{NewEvent(RetryAttempted, t0)}
			e.Events[0].Name = "FALLBACK_USED"
		}, "/events/0/name", RuleNameMismatch, LevelError, ErrNameMismatch},
		{"condition kind", func(e *Envelope) {
			c := NewCondition(ProvenanceIncomplete, ScopeArtefact, false)
			c.Status.Kind = KindEvent
			e.Conditions = []Condition{c}
		}, "/conditions/0/kind", RuleConditionKind, LevelError, ErrInvalid},
		{"condition 8xxx", func(e *Envelope) { e.Conditions = []Condition{NewCondition(FallbackUsed, ScopeStep, false)} }, "/conditions/0/kind", RuleEventOnly, LevelError, ErrEventOnly},
		{"condition envelope kind", func(e *Envelope) {
			e.Conditions = []Condition{{Envelope: New(LowConfidence, ScopeArtefact, false, t0)}}
		}, "/conditions/0/status/kind", RuleConditionKind, LevelError, ErrInvalid},
		{"condition empty", func(e *Envelope) { e.Conditions = []Condition{{}} }, "/conditions/0", RuleConditionShape, LevelError, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(RateLimited, ScopeToolCall, false, t0)
			tt.edit(e)
			var got *Issue
			for _, is := range Check(e) {
				if is.Rule == tt.rule && is.Path == tt.path {
					got = &is
					break
				}
			}
			if got == nil {
				t.Fatalf("no %s issue at %s; got %v", tt.rule, tt.path, Check(e))
			}
			if got.Level != tt.level {
				t.Errorf("level = %s, want %s", got.Level, tt.level)
			}
			err := Validate(e)
			if tt.level == LevelWarning {
				if err != nil {
					t.Errorf("warning made Validate fail: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.err) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate() = %v, want errors.Is %v", err, tt.err)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		edit func(e *Envelope)
	}{
		{"minimum", func(*Envelope) {}},
		{"namespaced scope with colon", func(e *Envelope) { e.Status.Scope = "urn:example:batch" }},
		{"private extension code", func(e *Envelope) { e.Status.Code, e.Status.Name = 9600, "ACME_QUEUE_PAUSED" }},
		{"experimental extension code", func(e *Envelope) { e.Status.Code, e.Status.Name = 9850, "TRIAL_2" }},
		{"event-kind non-8xxx event", func(e *Envelope) {
			e.Events = []Event{NewEvent(HallucinationDetected, t0)}
		}},
		{"compact condition", func(e *Envelope) {
			e.Conditions = []Condition{NewCondition(ProvenanceIncomplete, ScopeArtefact, false)}
		}},
		{"semver with prerelease", func(e *Envelope) { e.SpecVersion = "0.1.1-rc.1+build.5" }},
		{"offset timestamp", func(e *Envelope) { e.OccurredAt = "2026-08-08T14:00:00.123456789+02:00" }},
		{"namespaced details", func(e *Envelope) { e.Details = map[string]any{"org.example.calendar": map[string]any{}} }},
		{"phase UNKNOWN terminal", func(e *Envelope) { e.Status.Phase, e.Status.Terminal = PhaseUnknown, true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(RateLimited, ScopeToolCall, false, t0)
			tt.edit(e)
			for _, is := range Check(e) {
				t.Errorf("unexpected %s", is)
			}
		})
	}
}

func TestValidationErrorMessage(t *testing.T) {
	e := New(RateLimited, "", false, t0)
	e.Status.Name, e.SpecVersion, e.OccurredAt = "x", "", ""
	e.Details = map[string]any{"k": 1}
	err := Validate(e)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatal(err)
	}
	if len(ve.Errors()) != 4 || len(ve.Warnings()) != 1 {
		t.Fatalf("errors %v warnings %v", ve.Errors(), ve.Warnings())
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "asc: invalid envelope: 4 error(s), 1 warning(s)") || !strings.Contains(msg, "and 1 more") {
		t.Errorf("Error() = %q", msg)
	}
	if Validate(nil) == nil {
		t.Error("Validate(nil) = nil")
	}
}
