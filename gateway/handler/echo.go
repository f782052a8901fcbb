package handler

import (
	"context"
	"encoding/json"

	"github.com/custos-runtime/custos/aais"
)

// Echo is the built-in handler that answers {"echo": ARGS}: it runs nothing
// and exists for demos, tests and connectivity checks. It has no
// configuration.
type Echo struct{}

// NewEcho returns the echo handler.
func NewEcho() *Echo { return &Echo{} }

// Describe says that the call only returns its arguments.
func (*Echo) Describe(Call) (Descriptor, error) {
	return Descriptor{
		Kind:        "echo",
		Effects:     []string{"Returns the arguments unchanged; nothing else happens"},
		Risk:        aais.RiskLow,
		RiskReasons: []string{"Has no side effects"},
	}, nil
}

// Execute returns {"echo": ARGS} with ARGS compacted, in the call's payload
// type.
func (*Echo) Execute(ctx context.Context, c Call) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fail(cancelCode(ctx), refused, "echo: %v", err)
	}
	args, err := compactArguments(c.Args)
	if err != nil {
		return Result{}, err
	}
	data := make([]byte, 0, len(args)+9)
	data = append(data, `{"echo":`...)
	data = append(data, args...)
	data = append(data, '}')
	return Result{PayloadType: c.PayloadType, Data: json.RawMessage(data)}, nil
}
