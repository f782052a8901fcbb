package handler_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/jcs"
)

// FuzzAction: for any arguments bytes, Action either fails or returns an
// action whose digest aais.ActionDigest reproduces, whose arguments are the
// input compacted, and which aais accepts as an action.
func FuzzAction(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":1,"a":2}`, `[]`, `"x"`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}",
		`{"n":1e400}`, `{"n":12345678901234567890}`, `{"a":{"b":[1,2,{"c":null}]}}`,
		" {\"z\" : 1.50 , \"a\":\"\\u00e9<>\" } ", `{"a":1}x`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		c := goldenCall
		c.Args = args
		action, digest, err := handler.Action(c, goldenDescriptor)
		if err != nil {
			return
		}
		again, err := aais.ActionDigest(action)
		if err != nil || again != digest {
			t.Fatalf("aais.ActionDigest = %s, %v; Action said %s", again, err, digest)
		}
		a, err := aais.NewAction(action)
		if err != nil {
			t.Fatalf("aais refuses the action: %v", err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err != nil {
			t.Fatalf("accepted arguments json refuses: %v", err)
		}
		if !bytes.Equal(a.Arguments(), compact.Bytes()) {
			t.Fatalf("arguments %s, want %s", a.Arguments(), compact.Bytes())
		}
		v, err := jcs.Decode(args)
		if err != nil {
			t.Fatalf("accepted arguments jcs refuses: %v", err)
		}
		if _, ok := v.(map[string]any); !ok {
			t.Fatalf("accepted arguments are not an object: %T", v)
		}
	})
}
