package asc

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaBlind lists invalid vectors a structural schema cannot reject:
// registry knowledge, strict-JSON rules and calendar validity.
var schemaBlind = map[string]bool{
	"name.mismatch--rate-limited-named-timeout.json":    true,
	"name.mismatch--registered-name-on-other-code.json": true,
	"json--duplicate-key.json":                          true,
	"timestamp--bad-month.json":                         true,
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemaAcceptsValidVectors(t *testing.T) {
	s := compileSchema(t)
	for _, path := range vectors(t, "valid") {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(readFile(t, path)))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
	}
}

func TestSchemaRejectsInvalidVectors(t *testing.T) {
	s := compileSchema(t)
	for _, path := range vectors(t, "invalid") {
		name := filepath.Base(path)
		if schemaBlind[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(readFile(t, path)))
			if err != nil {
				if strings.HasPrefix(name, "json--") {
					return
				}
				t.Fatal(err)
			}
			if err := s.Validate(v); err == nil {
				t.Error("schema accepts an invalid vector")
			}
		})
	}
}

func TestSchemaIsACopy(t *testing.T) {
	a := Schema()
	a[0] = 'x'
	if Schema()[0] != '{' {
		t.Fatal("Schema returns shared memory")
	}
}
