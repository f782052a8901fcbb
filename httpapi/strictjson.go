package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/custos-runtime/custos/jcs"
)

// decodeObject decodes body, which must be one JSON object whose members
// are among names (exactly: encoding/json alone would match "VERDICT" to
// "verdict"), into v. Duplicate member names, invalid UTF-8 and data after
// the object are refused (jcs.Decode), as every other parser of this
// package refuses them.
func decodeObject(body []byte, v any, names ...string) error {
	doc, err := jcs.Decode(body)
	if err != nil {
		return err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("not a JSON object")
	}
	for k := range obj {
		if !slices.Contains(names, k) {
			return fmt.Errorf("unknown member %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the object")
	}
	return nil
}
