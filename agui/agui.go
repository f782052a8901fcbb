// Package agui is the AG-UI binding of AAIS (AAIS adapters, AG-UI row):
// a run that needs a person's approval pauses with an AG-UI interrupt, and
// the person's answer comes back as the resume of a new run.
//
//   - Interrupt builds the AG-UI event that pauses the run: a RUN_FINISHED
//     event with outcome "interrupt" whose interrupt carries the full
//     approval.requested envelope at interrupt.metadata.aais.
//   - Resume reads the resume of the next run (the RunAgentInput, or its
//     resume object alone), takes the approval.decided envelope at
//     resume.metadata.aais and has the authority decide it as the actor the
//     caller authenticated. An actor written in the body is never used.
//     The outcome says whether the run continues (approved) or ends (any
//     other outcome), with the authority's receipt either way.
//
// AG-UI owns the run lifecycle (the harness still emits its snapshots
// before the interrupt and starts a new run on resume); AAIS owns the
// approval: what was asked, who decided, and the digest that binds the
// decision to the exact action.
//
// The package is transport-independent; NewHandler is an HTTP endpoint for
// resumes (POST /agui/resume) built on it.
package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/jsonx"
	"github.com/custos-runtime/custos/jcs"
)

// AG-UI names used by the binding.
const (
	// EventRunFinished is the AG-UI event type that ends a run.
	EventRunFinished = "RUN_FINISHED"
	// OutcomeInterrupt is the RUN_FINISHED outcome of a paused run.
	OutcomeInterrupt = "interrupt"
	// ReasonToolCall is the interrupt reason: a tool call waits for
	// approval.
	ReasonToolCall = "tool_call"
	// MetadataKey is the member of interrupt.metadata and resume.metadata
	// that carries the AAIS envelope.
	MetadataKey = "aais"
)

// MaxBodySize caps a resume body.
const MaxBodySize = 1 << 20

// Errors. Every error Resume returns wraps one of them (or is an error of
// the authority).
var (
	// ErrMalformed: the body is not a resume this binding accepts. Nothing
	// was decided.
	ErrMalformed = errors.New("agui: malformed resume")
	// ErrUnauthenticated: no authenticated actor was given. Nothing was
	// decided.
	ErrUnauthenticated = errors.New("agui: no authenticated actor")
	// ErrInvalidRequest: Interrupt was given something other than a valid
	// approval.requested message.
	ErrInvalidRequest = errors.New("agui: not an approval.requested message")
)

// Outcome is what a resume leads to.
type Outcome struct {
	// Continue is true when the request was approved: the run goes on and
	// the approved action may run. Any other outcome (denied, cancelled,
	// expired, stale, conflict, invalid) ends the run.
	Continue bool
	// Receipt is the authority's approval.resolved message.
	Receipt *aais.Message
}

// Interrupt returns the AG-UI event that pauses a run for req, an
// approval.requested message:
//
//	{"type":"RUN_FINISHED","outcome":"interrupt",
//	 "interrupt":{"id":REQUEST_ID,"reason":"tool_call","message":SUMMARY,
//	              "metadata":{"aais":ENVELOPE}}}
//
// ENVELOPE is req exactly as aais.Marshal writes it. Use InterruptRun to
// name the thread and run.
func Interrupt(req *aais.Message) ([]byte, error) {
	return InterruptRun("", "", req)
}

// InterruptRun is Interrupt with the event's threadId and runId (each
// omitted when "").
func InterruptRun(threadID, runID string, req *aais.Message) ([]byte, error) {
	if req == nil || req.Type != aais.TypeRequested || req.Request == nil {
		return nil, ErrInvalidRequest
	}
	env, err := aais.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	type interrupt struct {
		ID       string                     `json:"id"`
		Reason   string                     `json:"reason"`
		Message  string                     `json:"message,omitempty"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	ev := struct {
		Type      string    `json:"type"`
		ThreadID  string    `json:"threadId,omitempty"`
		RunID     string    `json:"runId,omitempty"`
		Outcome   string    `json:"outcome"`
		Interrupt interrupt `json:"interrupt"`
	}{
		Type: EventRunFinished, ThreadID: threadID, RunID: runID, Outcome: OutcomeInterrupt,
		Interrupt: interrupt{
			ID: req.Request.ID, Reason: ReasonToolCall, Message: req.Request.Action.Summary(),
			Metadata: map[string]json.RawMessage{MetadataKey: env},
		},
	}
	return jsonx.Marshal(ev)
}

// runInputMembers are the members of an AG-UI RunAgentInput.
var runInputMembers = map[string]bool{
	"threadId": true, "runId": true, "parentRunId": true, "state": true, "messages": true,
	"tools": true, "context": true, "forwardedProps": true, "resume": true,
}

// ParseResume reads a resume strictly and returns the approval.decided
// message it carries. body is an AG-UI RunAgentInput with a resume member,
// or the resume object alone:
//
//	{"interruptId":REQUEST_ID,"payload":ANY,"metadata":{"aais":ENVELOPE}}
//
// The JSON must decode strictly (no duplicate members, valid UTF-8,
// interoperable numbers, at most MaxBodySize bytes); a RunAgentInput may
// carry only its own members, the resume object only interruptId, payload
// and metadata; metadata.aais must be a valid approval.decided envelope
// (aais.Parse) for the request interruptId names. Errors wrap ErrMalformed.
func ParseResume(body []byte) (*aais.Message, error) {
	v, err := (&jcs.Options{MaxSize: MaxBodySize}).Decode(body)
	if err != nil {
		return nil, malformed("body: %v", err)
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("body: not a JSON object")
	}
	// jcs checked the document; the raw members are read again to keep
	// the envelope's bytes.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, malformed("body: %v", err)
	}
	path := "resume"
	if _, isInput := top["resume"]; isInput {
		for k := range top {
			if !runInputMembers[k] {
				return nil, malformed("body: unknown RunAgentInput member %q", k)
			}
		}
		r, ok := top["resume"].(map[string]any)
		if !ok {
			return nil, malformed("resume: not a JSON object")
		}
		top = r
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(raw["resume"], &inner); err != nil {
			return nil, malformed("resume: %v", err)
		}
		raw = inner
	} else if _, ok := top["interruptId"]; !ok {
		return nil, malformed("body: neither a RunAgentInput with resume nor a resume object")
	}
	for k := range top {
		switch k {
		case "interruptId", "payload", "metadata":
		default:
			return nil, malformed("%s: unknown member %q", path, k)
		}
	}
	id, ok := top["interruptId"].(string)
	if !ok || id == "" {
		return nil, malformed("%s.interruptId: want a non-empty string", path)
	}
	md, ok := top["metadata"].(map[string]any)
	if !ok {
		return nil, malformed("%s.metadata: want an object carrying %q", path, MetadataKey)
	}
	if _, ok := md[MetadataKey].(map[string]any); !ok {
		return nil, malformed("%s.metadata.%s: want an approval.decided envelope", path, MetadataKey)
	}
	var mdRaw map[string]json.RawMessage
	if err := json.Unmarshal(raw["metadata"], &mdRaw); err != nil {
		return nil, malformed("%s.metadata: %v", path, err)
	}
	m, err := aais.Parse(mdRaw[MetadataKey])
	if err != nil {
		return nil, malformed("%s.metadata.%s: %v", path, MetadataKey, err)
	}
	if m.Type != aais.TypeDecided || m.Decision == nil {
		return nil, malformed("%s.metadata.%s: want approval.decided, got %s", path, MetadataKey, m.Type)
	}
	if m.Decision.RequestID != id {
		return nil, malformed("%s.interruptId %q does not name the decided request %q", path, id, m.Decision.RequestID)
	}
	return m, nil
}

// Resume decides the approval a resume carries. actor is who the caller's
// authenticated channel says is deciding; it replaces whatever actor the
// decision in the body names, and a zero actor is refused
// (ErrUnauthenticated). currentAction, when not nil, is the action as it
// would run now: a decision on another digest resolves as stale
// (aais.Authority.Decide).
//
// The outcome continues the run only when the receipt says approved. A
// decision repeated identically gets the same receipt; a different second
// decision gets a conflict receipt and ends the run.
func Resume(ctx context.Context, authority *aais.Authority, body []byte, actor aais.Actor, currentAction []byte) (Outcome, error) {
	if authority == nil {
		return Outcome{}, errors.New("agui: no authority")
	}
	if actor.ID == "" || actor.Type == "" {
		return Outcome{}, ErrUnauthenticated
	}
	m, err := ParseResume(body)
	if err != nil {
		return Outcome{}, err
	}
	receipt, err := authority.Decide(ctx, m.Decision, actor, currentAction)
	if err != nil {
		return Outcome{}, err
	}
	if aais.Partial(receipt) {
		// A vote towards a quorum: the request is still pending, so the
		// run does not continue yet.
		return Outcome{Receipt: receipt}, nil
	}
	if receipt == nil || receipt.Resolution == nil {
		return Outcome{}, errors.New("agui: the authority returned no receipt")
	}
	return Outcome{Continue: receipt.Resolution.Outcome == aais.OutcomeApproved, Receipt: receipt}, nil
}

func malformed(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return fmt.Errorf("%w: %s", ErrMalformed, strings.TrimSpace(msg))
}
