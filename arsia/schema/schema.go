package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/custos-runtime/custos/internal/pyrepr"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// EnvelopeSchema is the schema of an ARSIA message envelope.
const EnvelopeSchema = "arsia-message.schema.json"

// Sentinel errors returned by Validate.
var (
	// ErrUnknownSchema means the ref names no embedded schema file.
	ErrUnknownSchema = errors.New("arsia/schema: unknown schema")
	// ErrInternal means the validator failed on an input; the instance
	// must be treated as invalid.
	ErrInternal = errors.New("arsia/schema: internal validator failure")
)

//go:embed schemas/*.json
var embedded embed.FS

var defaultRegistry = sync.OnceValues(func() (*registry, error) {
	sub, err := fs.Sub(embedded, "schemas")
	if err != nil {
		return nil, err
	}
	return newRegistry(sub)
})

// Error is one L1 failure, as Python jsonschema's iter_errors reports it.
type Error struct {
	// Pointer is the RFC 6901 JSON Pointer of the failing value; "" is the
	// instance itself.
	Pointer string
	// Keyword is the failing JSON Schema keyword (required, enum, pattern,
	// ...); "false" for a false schema.
	Keyword string
	// Message is Python jsonschema's message, with the reference SDK's
	// pattern rewrites (e.g. "'from' is a required property").
	Message string
	// Params carries the keyword's operands for programs: "property" for
	// required, "allowed" for enum, "pattern", "limit" for size and range
	// keywords, "properties" for additionalProperties... It may be nil.
	Params map[string]any
}

// String renders the error as the reference SDK's schema_violation
// message: "<pointer>: <message>", the pointer being "<root>" when empty.
func (e Error) String() string {
	p := e.Pointer
	if p == "" {
		p = "<root>"
	}
	return p + ": " + e.Message
}

// Join is errs as one message: each error's String, joined by "; ".
func Join(errs []Error) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.String()
	}
	return strings.Join(msgs, "; ")
}

// Validate checks instance against ref, a schema file name optionally
// followed by a JSON Pointer fragment ("arsia-common.schema.json#/$defs/agent-id").
// The instance is decoded JSON: map[string]any, []any, string, bool, nil and
// numbers as json.Number, float64 or Go integers.
//
// The errors are sorted by pointer; none means valid. The error return is
// for an unknown ref (ErrUnknownSchema), a schema that does not compile,
// or ErrInternal; the instance is then not known to be valid.
func Validate(instance any, ref string) ([]Error, error) {
	// The envelope fast path: see ValidateEnvelope.
	if ref == EnvelopeSchema && fastPathEnabled() && fastEnvelopeValid(instance) {
		return nil, nil
	}
	r, err := defaultRegistry()
	if err != nil {
		return nil, fmt.Errorf("arsia/schema: loading embedded schemas: %w", err)
	}
	return r.validate(instance, ref)
}

// ValidateEnvelope checks an envelope against EnvelopeSchema. It fails
// closed: should the embedded schema ever be unusable, it reports that as
// an error at the root rather than nothing.
//
// Common envelopes are decided by a hand-written check of the schema that
// only ever answers "valid" when the full validator would report nothing
// (see fastpath.go); everything else, and every error message, comes from
// the full validator.
func ValidateEnvelope(instance any) []Error {
	errs, err := Validate(instance, EnvelopeSchema)
	if err != nil {
		return []Error{{Keyword: "$schema", Message: err.Error()}}
	}
	return errs
}

// Names lists the embedded schema files, sorted.
func Names() []string {
	r, err := defaultRegistry()
	if err != nil {
		return nil
	}
	return slices.Clone(r.names)
}

// File returns a copy of an embedded schema file, byte for byte as
// published upstream.
func File(name string) ([]byte, bool) {
	r, err := defaultRegistry()
	if err != nil {
		return nil, false
	}
	data, ok := r.files[name]
	return bytes.Clone(data), ok
}

func (r *registry) validate(instance any, ref string) (errs []Error, err error) {
	sch, err := r.schemaFor(ref)
	if err != nil {
		return nil, err
	}
	// santhosh-tekuri expects well-formed JSON values; report the others
	// here instead of handing them over.
	if bad := nonJSON(instance, nil, nil); len(bad) > 0 {
		return sortErrors(bad), nil
	}
	defer func() {
		if p := recover(); p != nil {
			errs, err = nil, fmt.Errorf("%w: %v", ErrInternal, p)
		}
	}()
	verr := sch.Validate(instance)
	if verr == nil {
		return nil, nil
	}
	ve, ok := verr.(*jsonschema.ValidationError)
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrInternal, verr)
	}
	f := &flattener{r: r}
	f.walk(ve, instance, nil)
	if len(f.out) == 0 { // never report an invalid instance as valid
		f.add(nil, "", "is not valid under the given schema", nil, instance)
	}
	return sortErrors(f.out), nil
}

func sortErrors(in []located) []Error {
	slices.SortStableFunc(in, func(a, b located) int { return comparePaths(a.path, b.path) })
	out := make([]Error, len(in))
	for i, l := range in {
		out[i] = l.Error
	}
	return out
}

// nonJSON reports the values of v that are not decoded JSON: other Go
// types, NaN and infinities, and json.Number text that is not a JSON
// number.
func nonJSON(v any, path []string, out []located) []located {
	bad := false
	switch v := v.(type) {
	case nil, bool, string,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
	case float64:
		bad = math.IsNaN(v) || math.IsInf(v, 0)
	case float32:
		bad = math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
	case json.Number:
		bad = !isJSONNumber(string(v))
	case []any:
		for i, e := range v {
			out = nonJSON(e, append(path, fmt.Sprint(i)), out)
		}
	case map[string]any:
		for k, e := range v {
			out = nonJSON(e, append(path, k), out)
		}
	default:
		bad = true
	}
	if bad {
		p := slices.Clone(path)
		out = append(out, located{
			Error: Error{Pointer: pointer(p), Keyword: "type", Message: pyrepr.Repr(v) + " is not a JSON value"},
			path:  p,
		})
	}
	return out
}

// isJSONNumber reports whether s is a number in RFC 8259 grammar.
func isJSONNumber(s string) bool {
	i := 0
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
