// Package openapitest loads custos serve's OpenAPI document into a real
// OpenAPI 3.1 validator (pb33f/libopenapi-validator), for tests that
// check recorded requests and responses against it. Only tests import it.
package openapitest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi/datamodel"

	"github.com/custos-runtime/custos/httpapi/openapi"
)

// Load builds a validator for doc (the document as served, JSON or YAML),
// its relative references resolved among schemas (file name → contents,
// as served under /openapi/schemas/). dir is an empty scratch directory:
// the files are laid out there as they are served, so that the
// references resolve exactly as a client following them would. The
// document itself must be valid OpenAPI.
func Load(dir string, doc []byte, schemas map[string][]byte) (validator.Validator, error) {
	sdir := filepath.Join(dir, strings.Trim(openapi.SchemaPrefix, "/"))
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return nil, err
	}
	for name, b := range schemas {
		if name != filepath.Base(name) {
			return nil, fmt.Errorf("schema name %q is not a file name", name)
		}
		if err := os.WriteFile(filepath.Join(sdir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	d, err := libopenapi.NewDocumentWithConfiguration(doc, &datamodel.DocumentConfiguration{
		BasePath: dir, AllowFileReferences: true})
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("the document is not valid OpenAPI: %s", Describe(verrs))
	}
	return v, nil
}

// Describe renders validation errors, one a line, with the failing
// schema locations.
func Describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, s := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s at %s", s.Reason, s.FieldPath)
		}
	}
	return b.String()
}
