package schema

import (
	"fmt"
	"github.com/custos-runtime/custos/internal/pyrepr"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// This file turns santhosh-tekuri's error tree into the flat list Python
// jsonschema's iter_errors yields, worded as Python words it.

// patternRewrites are the reference SDK's friendlier texts for patterns
// that recur across ARSIA schemas, chosen by a substring of the failing
// pattern, first match wins.
var patternRewrites = []struct{ marker, text string }{
	{"agent:", "must be in agent:org.name format (e.g., agent:acme.billing)"},
	{"]{8}-", "must be a UUID v4 (e.g., 550e8400-e29b-41d4-a716-446655440000)"},
	{`^\d+\.\d+$`, "must be a semver string (e.g., 1.0)"},
	{`[a-zA-Z][a-zA-Z0-9]*(\.`, "must have ≥2 dot-separated segments (e.g., com.acme.billing.create-invoice)"},
}

// located is an Error with what sorting needs.
type located struct {
	Error
	path []string
}

type flattener struct {
	r   *registry
	out []located
}

// walk appends the leaf failures under e. root is the value e's instance
// location is relative to; when at is non-nil it replaces the location
// (errors about property names sit on the object, as in Python).
func (f *flattener) walk(e *jsonschema.ValidationError, root any, at []string) {
	path := at
	if path == nil {
		path = e.InstanceLocation
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		// Applicators whose failures Python reports as the subschemas'
		// own errors ($ref, allOf; if/then, dependentSchemas and
		// properties are not wrapped at all).
		if len(e.Causes) == 0 {
			f.add(path, "", "is not valid under the given schema", nil, valueAt(root, e.InstanceLocation))
		}
		for _, c := range e.Causes {
			f.walk(c, root, at)
		}
		return
	case *kind.PropertyNames:
		for _, c := range e.Causes {
			f.walk(c, k.Property, slices.Clone(path))
		}
		if len(e.Causes) == 0 {
			f.add(path, "propertyNames", "is not valid under the given schema", nil, k.Property)
		}
		return
	}
	f.leaf(e, path, valueAt(root, e.InstanceLocation))
}

// leaf renders one failure of instance value inst at path.
func (f *flattener) leaf(e *jsonschema.ValidationError, path []string, inst any) {
	loc := e.SchemaURL
	repr := pyrepr.Repr(inst)
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		types := k.Want
		switch t := f.schemaValueOr(loc, "type", nil).(type) {
		case string:
			types = []string{t}
		case []any:
			types = types[:0:0]
			for _, s := range t {
				if s, ok := s.(string); ok {
					types = append(types, s)
				}
			}
		}
		quoted := make([]string, len(types))
		for i, t := range types {
			quoted[i] = pyrepr.String(t)
		}
		f.addText(path, "type", repr+" is not of type "+strings.Join(quoted, ", "), map[string]any{"expected": types})
	case *kind.Enum:
		f.addText(path, "enum", repr+" is not one of "+pyrepr.Repr(f.schemaValueOr(loc, "enum", k.Want)),
			map[string]any{"allowed": k.Want})
	case *kind.Const:
		f.addText(path, "const", pyrepr.Repr(f.schemaValueOr(loc, "const", k.Want))+" was expected",
			map[string]any{"expected": k.Want})
	case *kind.Format:
		f.addText(path, "format", repr+" is not a "+pyrepr.String(k.Want), map[string]any{"format": k.Want})
	case *kind.MinProperties:
		f.add(path, "minProperties", sizeWord(k.Want == 1, "should be non-empty", "does not have enough properties"), limit(k.Want), inst)
	case *kind.MaxProperties:
		f.add(path, "maxProperties", sizeWord(k.Want == 0, "is expected to be empty", "has too many properties"), limit(k.Want), inst)
	case *kind.MinItems:
		f.add(path, "minItems", sizeWord(k.Want == 1, "should be non-empty", "is too short"), limit(k.Want), inst)
	case *kind.MaxItems:
		f.add(path, "maxItems", sizeWord(k.Want == 0, "is expected to be empty", "is too long"), limit(k.Want), inst)
	case *kind.MinLength:
		f.add(path, "minLength", sizeWord(k.Want == 1, "should be non-empty", "is too short"), limit(k.Want), inst)
	case *kind.MaxLength:
		f.add(path, "maxLength", sizeWord(k.Want == 0, "is expected to be empty", "is too long"), limit(k.Want), inst)
	case *kind.AdditionalItems:
		var extra []any
		if arr, ok := inst.([]any); ok && k.Count <= len(arr) {
			extra = arr[len(arr)-k.Count:]
		}
		reprs := make([]string, len(extra))
		for i, x := range extra {
			reprs[i] = pyrepr.Repr(x)
		}
		f.addText(path, "additionalItems", fmt.Sprintf("Additional items are not allowed (%s %s unexpected)",
			strings.Join(reprs, ", "), wasWere(len(extra))), map[string]any{"count": k.Count})
	case *kind.Required:
		for _, p := range k.Missing {
			f.addText(path, "required", pyrepr.String(p)+" is a required property", map[string]any{"property": p})
		}
	case *kind.DependentRequired:
		for _, p := range k.Missing {
			f.addText(path, "dependentRequired", pyrepr.String(p)+" is a dependency of "+pyrepr.String(k.Prop),
				map[string]any{"property": p, "dependent": k.Prop})
		}
	case *kind.Dependency:
		for _, p := range k.Missing {
			f.addText(path, "dependencies", pyrepr.String(p)+" is a dependency of "+pyrepr.String(k.Prop),
				map[string]any{"property": p, "dependent": k.Prop})
		}
	case *kind.AdditionalProperties:
		props := slices.Clone(k.Properties)
		slices.Sort(props)
		reprs := make([]string, len(props))
		for i, p := range props {
			reprs[i] = pyrepr.String(p)
		}
		params := map[string]any{"properties": props}
		if pp, ok := f.r.schemaValue(loc, "patternProperties"); ok {
			if obj, ok := pp.(*pyrepr.Object); ok && len(obj.Keys) > 0 {
				patterns := slices.Clone(obj.Keys)
				slices.Sort(patterns)
				for i, p := range patterns {
					patterns[i] = pyrepr.String(p)
				}
				verb := "do"
				if len(props) == 1 {
					verb = "does"
				}
				f.addText(path, "additionalProperties", fmt.Sprintf("%s %s not match any of the regexes: %s",
					strings.Join(reprs, ", "), verb, strings.Join(patterns, ", ")), params)
				return
			}
		}
		f.addText(path, "additionalProperties", fmt.Sprintf("Additional properties are not allowed (%s %s unexpected)",
			strings.Join(reprs, ", "), wasWere(len(props))), params)
	case *kind.UniqueItems:
		f.add(path, "uniqueItems", "has non-unique elements", map[string]any{"duplicates": []int{k.Duplicates[0], k.Duplicates[1]}}, inst)
	case *kind.Contains:
		f.add(path, "contains", "does not contain items matching the given schema", nil, inst)
	case *kind.MinContains:
		if len(k.Got) == 0 {
			f.add(path, "contains", "does not contain items matching the given schema", nil, inst)
			return
		}
		f.addText(path, "minContains", fmt.Sprintf("Too few items match the given schema (expected at least %d but only %d matched)",
			k.Want, len(k.Got)), limit(k.Want))
	case *kind.MaxContains:
		f.addText(path, "maxContains", fmt.Sprintf("Too many items match the given schema (expected at most %d)", k.Want), limit(k.Want))
	case *kind.Pattern:
		params := map[string]any{"pattern": k.Want}
		for _, rw := range patternRewrites {
			if strings.Contains(k.Want, rw.marker) {
				f.add(path, "pattern", rw.text, params, inst)
				return
			}
		}
		f.add(path, "pattern", "does not match "+pyrepr.String(k.Want), params, inst)
	case *kind.Minimum:
		f.bound(path, "minimum", "is less than the minimum of", loc, k.Want.RatString(), inst)
	case *kind.Maximum:
		f.bound(path, "maximum", "is greater than the maximum of", loc, k.Want.RatString(), inst)
	case *kind.ExclusiveMinimum:
		f.bound(path, "exclusiveMinimum", "is less than or equal to the minimum of", loc, k.Want.RatString(), inst)
	case *kind.ExclusiveMaximum:
		f.bound(path, "exclusiveMaximum", "is greater than or equal to the maximum of", loc, k.Want.RatString(), inst)
	case *kind.MultipleOf:
		f.bound(path, "multipleOf", "is not a multiple of", loc, k.Want.RatString(), inst)
	case *kind.Not:
		f.add(path, "not", "should not be valid under "+pyrepr.Repr(f.schemaValueOr(loc, "not", true)), nil, inst)
	case *kind.AnyOf:
		f.add(path, "anyOf", "is not valid under any of the given schemas", nil, inst)
	case *kind.OneOf:
		if len(k.Subschemas) < 2 {
			f.add(path, "oneOf", "is not valid under any of the given schemas", nil, inst)
			return
		}
		// Python lists the later matches, then the first one.
		order := append(slices.Clone(k.Subschemas[1:]), k.Subschemas[0])
		reprs := make([]string, len(order))
		for i, idx := range order {
			reprs[i] = pyrepr.Repr(f.schemaValueOr(loc, "", true, "oneOf", strconv.Itoa(idx)))
		}
		f.add(path, "oneOf", "is valid under each of "+strings.Join(reprs, ", "),
			map[string]any{"matched": slices.Clone(k.Subschemas)}, inst)
	case *kind.FalseSchema:
		f.addText(path, "false", "False schema does not allow "+repr, nil)
	case *kind.InvalidJsonValue:
		f.add(path, "type", "is not a JSON value", nil, inst)
	case *kind.RefCycle:
		f.addText(path, "$ref", "infinite $ref loop between "+k.KeywordLocation1+" and "+k.KeywordLocation2, nil)
	default:
		keyword := ""
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			keyword = kp[0]
		}
		f.add(path, keyword, "is not valid under the given schema", nil, inst)
	}
}

// bound renders a numeric comparison; the limit is shown as the schema
// wrote it (an int or a float), falling back to the exact rational.
func (f *flattener) bound(path []string, keyword, text, loc, fallback string, inst any) {
	lim := f.schemaValueOr(loc, keyword, nil)
	shown := fallback
	if lim != nil {
		shown = pyrepr.Repr(lim)
	}
	f.add(path, keyword, text+" "+shown, map[string]any{"limit": lim}, inst)
}

// schemaValueOr returns the value of keyword in the schema at loc, decoded
// in file order, or def. With keyword "" the extra tokens name the value.
func (f *flattener) schemaValueOr(loc, keyword string, def any, more ...string) any {
	toks := more
	if keyword != "" {
		toks = append([]string{keyword}, more...)
	}
	if v, ok := f.r.schemaValue(loc, toks...); ok {
		return v
	}
	return def
}

// add records "<repr(inst)> <text>".
func (f *flattener) add(path []string, keyword, text string, params map[string]any, inst any) {
	f.addText(path, keyword, pyrepr.Repr(inst)+" "+text, params)
}

func (f *flattener) addText(path []string, keyword, msg string, params map[string]any) {
	f.out = append(f.out, located{
		Error: Error{Pointer: pointer(path), Keyword: keyword, Message: msg, Params: params},
		path:  path,
	})
}

func sizeWord(special bool, specialText, text string) string {
	if special {
		return specialText
	}
	return text
}

func limit(n int) map[string]any { return map[string]any{"limit": n} }

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// pointer renders tokens as an RFC 6901 JSON Pointer.
func pointer(path []string) string {
	var sb strings.Builder
	for _, tok := range path {
		sb.WriteByte('/')
		sb.WriteString(escapeToken(tok))
	}
	return sb.String()
}

// valueAt returns the instance value at a location of the validator.
func valueAt(root any, path []string) any {
	v := root
	for _, tok := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// comparePaths orders locations as Python orders error paths (deques of
// keys and indices): element by element, indices numerically, a prefix
// first.
func comparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareTokens(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func compareTokens(a, b string) int {
	ia, errA := strconv.Atoi(a)
	ib, errB := strconv.Atoi(b)
	if errA == nil && errB == nil && ia >= 0 && ib >= 0 {
		switch {
		case ia < ib:
			return -1
		case ia > ib:
			return 1
		}
	}
	return strings.Compare(a, b)
}
