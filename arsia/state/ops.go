package state

import (
	"fmt"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// Operation is one of the eight state operations (ARSIA-State §3.4).
type Operation string

// The eight operations.
const (
	OpGet      Operation = "GET"
	OpSet      Operation = "SET"
	OpDelete   Operation = "DELETE"
	OpQuery    Operation = "QUERY"
	OpSnapshot Operation = "SNAPSHOT"
	OpPurge    Operation = "PURGE"
	OpGrant    Operation = "GRANT"
	OpRevoke   Operation = "REVOKE"
)

// PayloadTypePrefix starts the payload.type of every state operation.
const PayloadTypePrefix = "arsiaprotocol.state/"

// Operations returns the eight operations in the order of ARSIA-State §3.4.
func Operations() []Operation {
	return []Operation{OpGet, OpSet, OpDelete, OpQuery, OpSnapshot, OpPurge, OpGrant, OpRevoke}
}

// Valid reports whether o is one of the eight operations.
func (o Operation) Valid() bool {
	switch o {
	case OpGet, OpSet, OpDelete, OpQuery, OpSnapshot, OpPurge, OpGrant, OpRevoke:
		return true
	}
	return false
}

// ParseOperation returns the operation named s ("GET", ...; exact, upper
// case), or an error wrapping ErrUnknownOperation.
func ParseOperation(s string) (Operation, error) {
	if o := Operation(s); o.Valid() {
		return o, nil
	}
	return "", fmt.Errorf("%w: %s", ErrUnknownOperation, quote(s))
}

// PayloadType returns the operation's payload.type, such as
// "arsiaprotocol.state/get", or "" for an invalid operation.
func (o Operation) PayloadType() string {
	if !o.Valid() {
		return ""
	}
	return PayloadTypePrefix + strings.ToLower(string(o))
}

// OperationOf returns the operation whose payload.type is t.
func OperationOf(payloadType string) (Operation, error) {
	name, ok := strings.CutPrefix(payloadType, PayloadTypePrefix)
	if ok && name == strings.ToLower(name) {
		if o := Operation(strings.ToUpper(name)); o.Valid() {
			return o, nil
		}
	}
	return "", fmt.Errorf("%w: payload type %s", ErrUnknownOperation, quote(payloadType))
}

// RequiredCapability returns the capability a request for o must carry
// (ARSIA-State §8.2): GET and QUERY need arsiaprotocol.state.read; SET,
// DELETE, GRANT and REVOKE arsiaprotocol.state.write; SNAPSHOT and PURGE
// their own elevated capabilities, which no wildcard grants.
func RequiredCapability(o Operation) (string, error) {
	switch o {
	case OpGet, OpQuery:
		return arsia.CapStateRead, nil
	case OpSet, OpDelete, OpGrant, OpRevoke:
		return arsia.CapStateWrite, nil
	case OpSnapshot:
		return arsia.CapStateSnapshot, nil
	case OpPurge:
		return arsia.CapStatePurge, nil
	}
	return "", fmt.Errorf("%w: %s", ErrUnknownOperation, quote(string(o)))
}

// Covers reports whether the scope entry (an exact capability or a
// wildcard such as arsiaprotocol.state.*) grants capability. It is
// arsia.MatchCapability: arsiaprotocol.state.* covers state.read and
// state.write but never state.purge or state.snapshot, which must be
// granted by name.
func Covers(scopeEntry, capability string) bool { return arsia.MatchCapability(scopeEntry, capability) }

// Authorize checks that a token scope grants what o requires. The error
// is an *arsia.Error with code forbidden and the details
// {required_capabilities, provided_capabilities}; it wraps ErrForbidden.
func Authorize(scope []string, o Operation) error {
	need, err := RequiredCapability(o)
	if err != nil {
		return err
	}
	for _, s := range scope {
		if Covers(s, need) {
			return nil
		}
	}
	provided := make([]any, len(scope))
	for i, s := range scope {
		provided[i] = s
	}
	return &arsia.Error{
		Code:        arsia.CodeForbidden,
		Description: fmt.Sprintf("%s requires the capability %s.", o, need),
		Details:     map[string]any{"required_capabilities": []any{need}, "provided_capabilities": provided},
		Err:         fmt.Errorf("%w: %s requires %s", ErrForbidden, o, need),
	}
}
