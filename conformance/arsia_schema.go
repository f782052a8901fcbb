package conformance

import (
	"fmt"

	"github.com/custos-runtime/custos/arsia/schema"
)

// execSchemaValidation validates a "Format B" vector's data against the
// schema its schema_ref names and applies expected.valid/error_contains
// to the reference SDK's rendering of the errors ("<pointer>: <message>").
func execSchemaValidation(env *arsiaEnv, c *arsiaCase) error {
	v, err := env.vector(c)
	if err != nil {
		return err
	}
	ref, _ := v["schema_ref"].(string)
	if ref == "" {
		return fmt.Errorf("vector %v has no schema_ref", v["id"])
	}
	data, ok := v["data"]
	if !ok {
		if data, ok = v["message"]; !ok {
			return fmt.Errorf("vector %v has no data", v["id"])
		}
	}
	errs, err := schema.Validate(data, ref)
	if err != nil {
		return err
	}
	texts := make([]string, len(errs))
	for i, e := range errs {
		texts[i] = e.String()
	}
	return expectValidity(c, texts)
}
