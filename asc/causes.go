package asc

import (
	"fmt"
	"strconv"
)

// Limits applied at every boundary: parsing, validation and marshalling all
// use the same numbers, so a document Parse accepts can always be marshalled
// again and a Go value Marshal accepts can always be parsed.
const (
	// MaxDocumentSize caps a JSON document in bytes.
	MaxDocumentSize = 1 << 20
	// MaxNesting caps the nesting of JSON arrays and objects.
	MaxNesting = 64
	// MaxCauseDepth caps how deep nested envelopes (causes and conditions
	// in envelope form) may go below the root envelope.
	MaxCauseDepth = 16
	// MaxCauseNodes caps the number of nested envelopes and compact causal
	// references in one tree, the root not counted.
	MaxCauseNodes = 256
)

// Cause is one entry of causes[]: either a nested envelope or a compact
// causal reference. Exactly one is set.
type Cause struct {
	Envelope *Envelope
	Ref      *CauseRef
}

// CauseRef is Custos' compact causal reference. ASC allows "compact causal
// references" in causes[] without defining them; Custos defines one as a JSON
// object without a "status" member that carries a "ref" (an opaque identifier
// of the referenced report: a URI, run id or diagnostic id), a code and name
// pair, or both, plus an optional scope:
//
//	{"ref": "urn:example:run-18a9/step-07", "code": 5003, "name": "DEPENDENCY_UNAVAILABLE", "scope": "tool_call"}
//
// Unknown members (for example "operation") are kept in Extra.
type CauseRef struct {
	Ref   string
	Code  Code
	Name  string
	Scope Scope
	Extra map[string]any
}

// treeWalk enforces the cause-tree limits while something recursive walks the
// nested envelopes of one root: the decoder, the validator and the encoder.
// Node identity is the Go pointer: a JSON document cannot express a cycle,
// but a Go value can, and a shared subtree would let a small value expand
// exponentially.
type treeWalk struct {
	depth  int
	nodes  int
	onPath map[*Envelope]bool
	seen   map[*Envelope]bool
}

// treeLimitError says which limit was hit; rule is one of the Rule constants.
type treeLimitError struct {
	rule string
	msg  string
}

func (e *treeLimitError) Error() string { return e.msg }
func (e *treeLimitError) Unwrap() error { return ErrCauseTree }

// enter is called before descending into a nested envelope (env may be nil
// for a compact reference or for the decoder, which has no pointers yet). On
// success the caller must call leave(env) when done with it.
func (w *treeWalk) enter(env *Envelope) error {
	if w.depth >= MaxCauseDepth {
		return &treeLimitError{RuleCauseDepth, "cause tree deeper than " + strconv.Itoa(MaxCauseDepth)}
	}
	if w.nodes >= MaxCauseNodes {
		return &treeLimitError{RuleCauseNodes, "cause tree has more than " + strconv.Itoa(MaxCauseNodes) + " nodes"}
	}
	if env != nil {
		if w.onPath == nil {
			w.onPath, w.seen = map[*Envelope]bool{}, map[*Envelope]bool{}
		}
		if w.onPath[env] {
			return &treeLimitError{RuleCauseCycle, fmt.Sprintf("cause tree contains a cycle (status %d)", env.Status.Code)}
		}
		if w.seen[env] {
			return &treeLimitError{RuleCauseRepeated, fmt.Sprintf("the same envelope (status %d) appears twice in the cause tree", env.Status.Code)}
		}
		w.onPath[env], w.seen[env] = true, true
	}
	w.depth++
	w.nodes++
	return nil
}

func (w *treeWalk) leave(env *Envelope) {
	w.depth--
	if env != nil {
		delete(w.onPath, env)
	}
}

// root marks the root envelope so that a cause pointing back at it is seen
// as a cycle.
func (w *treeWalk) root(env *Envelope) {
	if env == nil {
		return
	}
	w.onPath, w.seen = map[*Envelope]bool{env: true}, map[*Envelope]bool{env: true}
}
