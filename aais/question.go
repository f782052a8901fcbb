package aais

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Questions. AAIS 1.0 asks for permission only: a request offers choices
// and a decision picks one. An agent that needs an answer rather than a
// yes (which account, which date, what to write) asks with an ordinary
// request that carries QuestionExtension; the reviewer replies with an
// ordinary approve-once decision carrying ResponseExtension, and the
// receipt repeats the reply in its DecisionExtension, where the agent
// reads it (ResponseOf). The reply goes through the decision path, its
// policy and its audit like any other decision; a peer that does not know
// the extensions sees an approval, and the reply travels unread.

// QuestionExtension marks a request that asks a question: its value is an
// object {"prompt": string of 1..2000 characters} (the prompt is also the
// action's summary when absent).
const QuestionExtension = "custos.dev/question"

// ResponseExtension is the decision extension carrying a reply to a
// question: a JSON string of 1..MaxResponse characters.
const ResponseExtension = "custos.dev/response"

// MaxResponse caps a reply, in characters.
const MaxResponse = 4000

// Question returns the prompt of a request that asks a question (the
// action's summary when the extension names none); ok is false when req
// asks for permission only.
func Question(req *Request) (prompt string, ok bool) {
	if req == nil {
		return "", false
	}
	raw, ok := req.Extensions[QuestionExtension]
	if !ok {
		return "", false
	}
	var q struct {
		Prompt string `json:"prompt"`
	}
	if json.Unmarshal(raw, &q) != nil {
		return "", false
	}
	if q.Prompt == "" {
		q.Prompt = req.Action.Summary()
	}
	return q.Prompt, true
}

// Response returns the decision's ResponseExtension, "" when absent or not
// a string.
func Response(d *Decision) string {
	var s string
	if d == nil || json.Unmarshal(d.Extensions[ResponseExtension], &s) != nil {
		return ""
	}
	return s
}

// ResponseOf returns the reply a receipt records, "" when none.
func ResponseOf(r *Resolution) string {
	var v decidedBy
	if r == nil || json.Unmarshal(r.Extensions[DecisionExtension], &v) != nil {
		return ""
	}
	return v.Response
}

// CheckResponse reports whether decision d may carry the reply it does on
// request req: a reply only on a question, only with an approval, of
// 1..MaxResponse characters, and a question approved only with a reply.
func CheckResponse(req *Request, d *Decision) error {
	raw, has := d.Extensions[ResponseExtension]
	_, question := Question(req)
	if !has {
		if question && d.Decision == Approve {
			return fmt.Errorf("%w: request %s asks a question: reply with the decision extension %s", ErrInvalid, req.ID, ResponseExtension)
		}
		return nil
	}
	if !question {
		return fmt.Errorf("%w: request %s asks no question; a decision on it carries no %s", ErrInvalid, req.ID, ResponseExtension)
	}
	if d.Decision != Approve {
		return fmt.Errorf("%w: a reply goes with approve; deny or cancel without one", ErrInvalid)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("%w: the %s extension must be a string", ErrInvalid, ResponseExtension)
	}
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("%w: the reply is empty", ErrInvalid)
	}
	if n := utf8.RuneCountInString(s); n > MaxResponse {
		return fmt.Errorf("%w: the reply is %d characters long; at most %d are allowed", ErrInvalid, n, MaxResponse)
	}
	return nil
}
