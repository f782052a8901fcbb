package asc

import "fmt"

// A2AState is an A2A task state, spelled as on the A2A wire
// (TASK_STATE_COMPLETED). A2A's state stays the coarse lifecycle signal;
// ASC refines it and never replaces it.
type A2AState string

// The A2A task states ASC refines.
const (
	A2ASubmitted     A2AState = "TASK_STATE_SUBMITTED"
	A2AWorking       A2AState = "TASK_STATE_WORKING"
	A2AInputRequired A2AState = "TASK_STATE_INPUT_REQUIRED"
	A2AAuthRequired  A2AState = "TASK_STATE_AUTH_REQUIRED"
	A2ACompleted     A2AState = "TASK_STATE_COMPLETED"
	A2ARejected      A2AState = "TASK_STATE_REJECTED"
	A2AFailed        A2AState = "TASK_STATE_FAILED"
	A2ACanceled      A2AState = "TASK_STATE_CANCELED"
)

// A2AStates lists the states in lifecycle order.
func A2AStates() []A2AState {
	return []A2AState{A2ASubmitted, A2AWorking, A2AInputRequired, A2AAuthRequired,
		A2ACompleted, A2ARejected, A2AFailed, A2ACanceled}
}

// A2AStateFor returns the A2A task state a task-scope status refines. The
// normative table of the ASC bindings is followed where it speaks; the rest
// is Custos' reading (docs/asc.md):
//
//   - ACCEPTED → submitted; other 1xxx → working;
//   - 2xxx → completed;
//   - HUMAN_INPUT_REQUIRED and HUMAN_APPROVAL_REQUIRED → input-required (A2A
//     has no approval state; approving is input from a person);
//     AUTHENTICATION_REQUIRED → auth-required; CANCELLED → canceled;
//   - GUARDRAIL_BLOCKED, PERMISSION_DENIED, UNSUPPORTED_CAPABILITY → rejected
//     when terminal;
//   - POLICY_REDACTED → completed when terminal (a redacted result was
//     delivered);
//   - any other terminal 4xxx-7xxx → failed; a 7xxx is only the primary
//     terminal status when it withholds output, otherwise it travels as a
//     condition of a 2xxx status;
//   - non-terminal 3xxx-7xxx → working (for example a rate-limited attempt
//     that will be retried);
//   - 8xxx events and 9xxx extensions have no A2A state (ok is false).
func A2AStateFor(s Status) (state A2AState, ok bool) {
	switch s.Code {
	case Accepted:
		return A2ASubmitted, true
	case HumanInputRequired, HumanApprovalRequired:
		return A2AInputRequired, true
	case AuthenticationRequired:
		return A2AAuthRequired, true
	case Cancelled:
		return A2ACanceled, true
	}
	switch ClassOf(s.Code) {
	case ClassLifecycle:
		return A2AWorking, true
	case ClassSuccess:
		return A2ACompleted, true
	case ClassInterrupted, ClassRequestOrPolicy, ClassTransientFailure,
		ClassFatalOrIndeterminate, ClassQualityOrVerification:
		if !s.Terminal {
			return A2AWorking, true
		}
		switch s.Code {
		case GuardrailBlocked, PermissionDenied, UnsupportedCapability:
			return A2ARejected, true
		case PolicyRedacted:
			return A2ACompleted, true
		}
		return A2AFailed, true
	}
	return "", false
}

// A2AAllowedCodes returns the registered codes that may refine state, in
// ascending order. A code whose default terminal flag is contextual counts
// for both its terminal and its non-terminal reading.
func A2AAllowedCodes(state A2AState) []Code {
	var out []Code
	for _, e := range Registry() {
		for _, terminal := range terminalReadings(e.DefaultTerminal) {
			if got, ok := A2AStateFor(Status{Code: e.Code, Terminal: terminal}); ok && got == state {
				out = append(out, e.Code)
				break
			}
		}
	}
	return out
}

func terminalReadings(t Terminality) []bool {
	switch t {
	case TerminalYes:
		return []bool{true}
	case TerminalNo:
		return []bool{false}
	case TerminalContextual:
		return []bool{true, false}
	}
	return nil
}

// CheckA2A reports whether s is a valid refinement of the A2A state. The
// error wraps ErrBinding.
func CheckA2A(state A2AState, s Status) error {
	got, ok := A2AStateFor(s)
	if !ok {
		return fmt.Errorf("%w: %d %s refines no A2A task state", ErrBinding, s.Code, s.Name)
	}
	if got != state {
		return fmt.Errorf("%w: %d %s (terminal %t) refines %s, not %s", ErrBinding, s.Code, s.Name, s.Terminal, got, state)
	}
	return nil
}
