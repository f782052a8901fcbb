package asc

// Attribute is one span attribute. Values are string, int64 or bool, so they
// convert directly to OpenTelemetry attribute values without this package
// depending on OpenTelemetry.
type Attribute struct {
	Key   string
	Value any
}

// SpanAttributes returns the ASC span attributes of e. Every value is bounded
// (codes, names, enumerations, booleans); messages, run ids and other
// unbounded strings are never included. Without a retry contract,
// retryable and retry_safe are false: nothing is assumed. error.type is set,
// to the status name, only when SpanIsError.
func SpanAttributes(e *Envelope) []Attribute {
	s := e.Status
	var retryable, safe bool
	if e.Retry != nil {
		retryable, safe = e.Retry.Retryable, e.Retry.Safe
	}
	attrs := []Attribute{
		{"agent.status.code", int64(s.Code)},
		{"agent.status.name", s.Name},
		{"agent.status.class", string(ClassOf(s.Code))},
		{"agent.status.kind", string(s.Kind)},
		{"agent.status.scope", string(s.Scope)},
		{"agent.status.terminal", s.Terminal},
		{"agent.status.retryable", retryable},
		{"agent.status.retry_safe", safe},
	}
	if s.Phase != "" {
		attrs = append(attrs, Attribute{"agent.lifecycle.phase", string(s.Phase)})
	}
	if s.Code == HumanInputRequired || s.Code == HumanApprovalRequired {
		// The run waits for a person: an input or a decision.
		attrs = append(attrs, Attribute{"agent.human_action.required", true})
	}
	if SpanIsError(e) {
		attrs = append(attrs, Attribute{"error.type", s.Name})
	}
	return attrs
}

// SpanIsError reports whether the span status should be ERROR (with the
// status name as description): the code is in 5000-7999 and the status is
// terminal. Success leaves the span status unset, and a transient attempt
// that is not terminal must not mark the span as failed.
func SpanIsError(e *Envelope) bool {
	return e.Status.Terminal && e.Status.Code >= 5000 && e.Status.Code <= 7999
}
