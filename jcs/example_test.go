package jcs_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/custos-runtime/custos/jcs"
)

func ExampleCanonicalize() {
	in := []byte(`{
		"b": [1.50, 1e21, "caf\u00e9", "\/"],
		"a": {"z": null, "y": false}
	}`)
	out, err := jcs.Canonicalize(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	// Output: {"a":{"y":false,"z":null},"b":[1.5,1e+21,"café","/"]}
}

func ExampleCanonicalize_rejected() {
	_, err := jcs.Canonicalize([]byte(`{"user": {"id": 1, "id": 2}}`))
	fmt.Println(errors.Is(err, jcs.ErrDuplicateKey))
	fmt.Println(err)
	// Output:
	// true
	// jcs: duplicate member name at "/user/id" (byte 19): "id"
}

func ExampleDigest() {
	action := []byte(`{
  "kind": "process.exec",
  "name": "shell.exec",
  "summary": "Run the JavaScript syntax check",
  "arguments": {"command": "node --check script.js"},
  "working_directory": "/workspace/example",
  "effects": ["Starts a local Node.js process", "Reads script.js"]
}`)
	d, err := jcs.Digest(action)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d)
	fmt.Println(jcs.IsDigest(d))
	// Output:
	// sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8
	// true
}

func ExampleCanonicalizeValue() {
	v := map[string]any{
		"name":    "shell.exec",
		"effects": []any{},
		"dry_run": false,
		"retries": 3,
		"ratio":   json.Number("4.50"),
		"raw":     json.RawMessage(`{"y": 2, "x": 1}`),
	}
	out, err := jcs.CanonicalizeValue(v)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))

	// Structs are refused: omitempty would silently drop members.
	_, err = jcs.CanonicalizeValue(struct{ Name string }{"shell.exec"})
	fmt.Println(errors.Is(err, jcs.ErrUnsupportedType))
	// Output:
	// {"dry_run":false,"effects":[],"name":"shell.exec","ratio":4.5,"raw":{"x":1,"y":2},"retries":3}
	// true
}

func ExampleFormatNumber() {
	for _, f := range []float64{8542, 1e21, 1e-7, 0.000001, 333333333.33333329} {
		s, _ := jcs.FormatNumber(f)
		fmt.Println(s)
	}
	// Output:
	// 8542
	// 1e+21
	// 1e-7
	// 0.000001
	// 333333333.3333333
}
