package asc

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ProblemTypePrefix starts the Problem Details type of an ASC status:
// urn:agent-status:RATE_LIMITED.
const ProblemTypePrefix = "urn:agent-status:"

// HTTPStatus returns the HTTP status a synchronous API may answer with for a
// primary status code: the first advisory suggestion of the registry, or, for
// an unregistered code, a value by class (1xxx 202, 2xxx 200, 3xxx 202,
// 4xxx 400, 5xxx 503, 6xxx 500, 7xxx 422, 8xxx 200, anything else 500).
//
// HTTP describes the transport, not the run: an asynchronous status read
// answers 200 with the envelope whatever the run's outcome.
func HTTPStatus(c Code) int {
	if e, ok := lookupCode(c); ok && len(e.HTTP) > 0 {
		return e.HTTP[0]
	}
	switch ClassOf(c) {
	case ClassLifecycle, ClassInterrupted:
		return 202
	case ClassSuccess, ClassEvent:
		return 200
	case ClassRequestOrPolicy:
		return 400
	case ClassTransientFailure:
		return 503
	case ClassQualityOrVerification:
		return 422
	}
	return 500
}

// RetryAfter returns the Retry-After header value (delay-seconds, rounded
// up from retry.after_ms) when the envelope asks for a delay.
func RetryAfter(e *Envelope) (string, bool) {
	if e == nil || e.Retry == nil || e.Retry.AfterMS <= 0 {
		return "", false
	}
	return strconv.FormatInt((e.Retry.AfterMS+999)/1000, 10), true
}

// ProblemDetails is an RFC 9457 Problem Details document carrying an ASC
// status, as the ASC HTTP binding describes it.
type ProblemDetails struct {
	Type     string
	Title    string
	Status   int
	Detail   string
	Instance string
	// AgentStatus is the agent_status extension member.
	AgentStatus *ProblemStatus
	// Retry is the retry contract, a top-level member next to agent_status.
	Retry *Retry
	Extra map[string]any
}

// ProblemStatus is the agent_status member of a Problem Details document.
type ProblemStatus struct {
	Code     Code
	Name     string
	Scope    Scope
	Terminal bool
	Extra    map[string]any
}

// ToProblem renders e as Problem Details. detail is message.user only: the
// developer message and provenance stay out of a public error body.
func ToProblem(e *Envelope) *ProblemDetails {
	p := &ProblemDetails{
		Type:   ProblemTypePrefix + e.Status.Name,
		Title:  Title(e.Status.Code, e.Status.Name),
		Status: HTTPStatus(e.Status.Code),
		AgentStatus: &ProblemStatus{
			Code: e.Status.Code, Name: e.Status.Name, Scope: e.Status.Scope, Terminal: e.Status.Terminal,
		},
	}
	if e.Message != nil {
		p.Detail = e.Message.User
	}
	if e.Retry != nil {
		r := *e.Retry
		p.Retry = &r
	}
	return p
}

// Title turns a status name into a short English title: RATE_LIMITED
// becomes "Rate limited". An empty name falls back to the registry or the
// class.
func Title(c Code, name string) string {
	if name == "" {
		name = c.Name()
	}
	if name == "" {
		return "Agent status " + strconv.Itoa(int(c)) + " (" + string(ClassOf(c)) + ")"
	}
	t := strings.ToLower(strings.ReplaceAll(name, "_", " "))
	return strings.ToUpper(t[:1]) + t[1:]
}

// FromProblem reads the ASC status back out of Problem Details. The type
// URN and agent_status must name the same status, and a registered code must
// travel with its registered name; otherwise the error wraps ErrBinding or
// ErrNameMismatch. Problem Details carry no timestamp, so at becomes
// occurred_at.
func FromProblem(p *ProblemDetails, at time.Time) (*Envelope, error) {
	name, ok := strings.CutPrefix(p.Type, ProblemTypePrefix)
	if !ok {
		return nil, fmt.Errorf("%w: problem type %q is not %s<NAME>", ErrBinding, p.Type, ProblemTypePrefix)
	}
	if p.AgentStatus == nil {
		return nil, fmt.Errorf("%w: problem has no agent_status member", ErrBinding)
	}
	as := p.AgentStatus
	if as.Name != name {
		return nil, fmt.Errorf("%w: problem type names %s but agent_status names %s", ErrBinding, name, as.Name)
	}
	var iss issues
	checkCodeName(&iss, "/agent_status", as.Code, as.Name)
	if err := iss.err(); err != nil {
		return nil, err
	}
	e := New(as.Code, as.Scope, as.Terminal, at)
	e.Status.Name = as.Name
	if p.Detail != "" {
		e.Message = &Message{User: p.Detail}
	}
	if p.Retry != nil {
		r := *p.Retry
		e.Retry = &r
	}
	return e, nil
}

// ParseProblem decodes a Problem Details document strictly (see Parse);
// unknown members are kept in Extra.
func ParseProblem(data []byte) (*ProblemDetails, error) {
	o, iss := decodeObject(data)
	if o == nil {
		return nil, iss.err()
	}
	p := &ProblemDetails{
		Type:     o.str("type"),
		Title:    o.str("title"),
		Status:   int(o.integer("status")),
		Detail:   o.str("detail"),
		Instance: o.str("instance"),
	}
	if a := o.child("agent_status"); a != nil {
		terminal, _ := a.boolean("terminal")
		p.AgentStatus = &ProblemStatus{Code: Code(a.integer("code")), Name: a.str("name"), Scope: Scope(a.str("scope")), Terminal: terminal}
		p.AgentStatus.Extra = a.rest()
	}
	if r := o.child("retry"); r != nil {
		p.Retry = o.d.retry(r)
	}
	p.Extra = o.rest()
	if err := iss.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// MarshalJSON implements json.Marshaler.
func (p ProblemDetails) MarshalJSON() ([]byte, error) {
	return appendObject(nil, p.Extra,
		always("type", p.Type),
		always("title", p.Title),
		always("status", p.Status),
		optString("detail", p.Detail),
		optString("instance", p.Instance),
		optValue("agent_status", p.AgentStatus, p.AgentStatus != nil),
		optValue("retry", p.Retry, p.Retry != nil),
	)
}

// MarshalJSON implements json.Marshaler.
func (s ProblemStatus) MarshalJSON() ([]byte, error) {
	return appendObject(nil, s.Extra,
		always("code", s.Code),
		always("name", s.Name),
		optString("scope", s.Scope),
		always("terminal", s.Terminal),
	)
}
