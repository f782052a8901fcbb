package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

func Example() {
	h := handler.NewEcho()
	call := handler.Call{
		Capability:  "notes.read",
		PayloadType: "com.example.notes/read",
		Args:        json.RawMessage(`{"id": "n-1"}`),
	}

	// Before asking for approval: the exact action and its digest.
	d, _ := h.Describe(call)
	action, digest, err := handler.Action(call, d)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(action))
	fmt.Println(digest)

	// After approval: Dispatch runs the call only if it is still that action.
	res, err := handler.Dispatch(context.Background(), h, call, digest)
	fmt.Println(string(res.Data), err)

	call.Args = json.RawMessage(`{"id": "n-2"}`)
	_, err = handler.Dispatch(context.Background(), h, call, digest)
	fmt.Println(errors.Is(err, handler.ErrStale), asc.CodeOf(err).Name())
	// Output:
	// {"kind":"echo","name":"notes.read","summary":"notes.read (echo)","arguments":{"id":"n-1"},"effects":["Returns the arguments unchanged; nothing else happens"]}
	// sha256:76fff9da199badd68886666c917ed0b6c1db0edef3fdc990bfdf1e7f957c2081
	// {"echo":{"id":"n-1"}} <nil>
	// true FAILED_PRECONDITION
}
