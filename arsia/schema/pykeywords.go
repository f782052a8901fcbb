package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Where santhosh-tekuri's semantics and Python jsonschema's differ in a way
// that changes verdicts or messages, loaded schema documents carry the
// keyword under a private name (pyKeywords) that the built-in validator
// ignores, and the vocabulary below evaluates it the Python way:
//
//   - multipleOf: Python divides in binary floating point when the divisor
//     is a float and accepts iff int(x/d) == x/d, so 0.07 is NOT a multiple
//     of 0.01 (0.07/0.01 == 7.000000000000001) while exact decimal
//     arithmetic says it is. ARSIA amounts use multipleOf 0.01 and 1e-8.
//   - type, const, enum: santhosh-tekuri stops checking a value at its
//     first failure among these three; Python goes on and reports every
//     keyword, e.g. both enum and pattern for a lower-case currency code,
//     and the conformance suite looks for the pattern message.
var pyKeywords = map[string]string{
	"multipleOf": "x-custos-python-multipleOf",
	"type":       "x-custos-python-type",
	"const":      "x-custos-python-const",
	"enum":       "x-custos-python-enum",
}

// pyNum is a JSON number as Python's json module decodes it: an int of any
// size, or a float.
type pyNum struct {
	isInt bool
	i     *big.Int // when isInt
	f     float64  // when !isInt
	lit   string   // literal, when decoded from json.Number
}

// toPyNum classifies an instance or schema number; ok is false for
// anything that is not a JSON number (bool included, as in Python's
// jsonschema).
func toPyNum(v any) (pyNum, bool) {
	switch n := v.(type) {
	case json.Number:
		lit := string(n)
		if strings.ContainsAny(lit, ".eE") {
			f, err := strconv.ParseFloat(lit, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return pyNum{}, false // out of range is ±Inf or 0, as float() gives
			}
			return pyNum{f: f, lit: lit}, true
		}
		i, ok := new(big.Int).SetString(lit, 10)
		return pyNum{isInt: true, i: i, lit: lit}, ok
	case float64:
		return pyNum{f: n}, true
	case float32:
		return pyNum{f: float64(n)}, true
	case int:
		return pyNum{isInt: true, i: big.NewInt(int64(n))}, true
	case int8:
		return pyNum{isInt: true, i: big.NewInt(int64(n))}, true
	case int16:
		return pyNum{isInt: true, i: big.NewInt(int64(n))}, true
	case int32:
		return pyNum{isInt: true, i: big.NewInt(int64(n))}, true
	case int64:
		return pyNum{isInt: true, i: big.NewInt(n)}, true
	case uint:
		return pyNum{isInt: true, i: new(big.Int).SetUint64(uint64(n))}, true
	case uint8:
		return pyNum{isInt: true, i: big.NewInt(int64(n))}, true
	case uint16:
		return pyNum{isInt: true, i: big.NewInt(int64(n))}, true
	case uint32:
		return pyNum{isInt: true, i: big.NewInt(int64(n))}, true
	case uint64:
		return pyNum{isInt: true, i: new(big.Int).SetUint64(n)}, true
	}
	return pyNum{}, false
}

// float converts like Python's float(int); ok is false on overflow, where
// Python raises OverflowError.
func (n pyNum) float() (float64, bool) {
	if !n.isInt {
		return n.f, true
	}
	f, _ := new(big.Float).SetInt(n.i).Float64()
	return f, !math.IsInf(f, 0)
}

// rat is the exact value (a float's exact binary value, as Fraction(x));
// ok is false for infinities and NaN.
func (n pyNum) rat() (*big.Rat, bool) {
	if n.isInt {
		return new(big.Rat).SetInt(n.i), true
	}
	if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
		return nil, false
	}
	return new(big.Rat).SetFloat64(n.f), true
}

// pyIsMultiple reports whether x is a multiple of d as Python's jsonschema
// decides it. Where Python would raise OverflowError it answers with exact
// arithmetic instead; a non-finite x is never a multiple.
func pyIsMultiple(x, d pyNum) bool {
	if !d.isInt {
		// float divisor: q = x / d; multiple iff int(q) == q.
		if xf, ok := x.float(); ok {
			q := xf / d.f
			if !math.IsInf(q, 0) && !math.IsNaN(q) {
				return math.Trunc(q) == q
			}
		}
		return exactMultiple(x, d)
	}
	if x.isInt {
		return new(big.Int).Rem(x.i, d.i).Sign() == 0
	}
	// float % int: the int becomes a float; zero remainder means multiple.
	if df, ok := d.float(); ok {
		return math.Mod(x.f, df) == 0
	}
	return exactMultiple(x, d)
}

func exactMultiple(x, d pyNum) bool {
	xr, ok1 := x.rat()
	dr, ok2 := d.rat()
	if !ok1 || !ok2 || dr.Sign() == 0 {
		return false
	}
	return new(big.Rat).Quo(xr, dr).IsInt()
}

// pyVocabulary evaluates the keywords renamed by renameKeywords.
func pyVocabulary() *jsonschema.Vocabulary {
	return &jsonschema.Vocabulary{
		URL:     "https://custos.invalid/vocab/python-jsonschema",
		Compile: compilePyKeywords,
	}
}

// pyKeywordsExt holds one schema object's renamed keywords.
type pyKeywordsExt struct {
	types      []string // nil when absent
	hasConst   bool
	constant   any
	enum       []any // nil when absent
	multipleOf *pyNum
}

func compilePyKeywords(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
	var ext pyKeywordsExt
	found := false
	if v, ok := obj[pyKeywords["type"]]; ok {
		found = true
		switch t := v.(type) {
		case string:
			ext.types = []string{t}
		case []any:
			ext.types = []string{}
			for _, e := range t {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("type: %v is not a type name", e)
				}
				ext.types = append(ext.types, s)
			}
		default:
			return nil, fmt.Errorf("type: %v is not a string or an array", v)
		}
		for _, t := range ext.types {
			switch t {
			case "null", "boolean", "object", "array", "number", "integer", "string":
			default:
				return nil, fmt.Errorf("type: unknown type %q", t)
			}
		}
	}
	if v, ok := obj[pyKeywords["const"]]; ok {
		found, ext.hasConst, ext.constant = true, true, v
	}
	if v, ok := obj[pyKeywords["enum"]]; ok {
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("enum: %v is not an array", v)
		}
		found, ext.enum = true, arr
	}
	if v, ok := obj[pyKeywords["multipleOf"]]; ok {
		d, ok := toPyNum(v)
		if !ok {
			return nil, fmt.Errorf("multipleOf: %v is not a number", v)
		}
		if r, ok := d.rat(); !ok || r.Sign() <= 0 {
			return nil, fmt.Errorf("multipleOf: %v is not strictly positive", v)
		}
		found, ext.multipleOf = true, &d
	}
	if !found {
		return nil, nil
	}
	return &ext, nil
}

// Validate implements jsonschema.SchemaExt. It reports santhosh-tekuri's
// own error kinds, which the message adapter renders.
func (x *pyKeywordsExt) Validate(ctx *jsonschema.ValidatorContext, v any) {
	if x.types != nil && !slices.ContainsFunc(x.types, func(t string) bool { return pyIsType(v, t) }) {
		ctx.AddError(&kind.Type{Got: pyTypeName(v), Want: x.types})
	}
	if x.hasConst {
		if eq, err := ctx.Equals(v, x.constant); err != nil {
			ctx.AddErr(err)
		} else if !eq {
			ctx.AddError(&kind.Const{Got: v, Want: x.constant})
		}
	}
	if x.enum != nil {
		matched := false
		for _, want := range x.enum {
			eq, err := ctx.Equals(v, want)
			if err != nil {
				ctx.AddErr(err)
				return
			}
			if eq {
				matched = true
				break
			}
		}
		if !matched {
			ctx.AddError(&kind.Enum{Got: v, Want: x.enum})
		}
	}
	if x.multipleOf != nil {
		if _, isBool := v.(bool); isBool {
			return
		}
		n, ok := toPyNum(v)
		if !ok || pyIsMultiple(n, *x.multipleOf) {
			return
		}
		got, _ := n.rat()
		want, _ := x.multipleOf.rat()
		ctx.AddError(&kind.MultipleOf{Got: got, Want: want})
	}
}

// pyIsType is Python jsonschema's draft 2020-12 type check: bools are not
// numbers, and a float with an integral value is an integer.
func pyIsType(v any, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "number":
		_, ok := toPyNum(v)
		return ok
	case "integer":
		n, ok := toPyNum(v)
		if !ok {
			return false
		}
		return n.isInt || (!math.IsInf(n.f, 0) && !math.IsNaN(n.f) && math.Trunc(n.f) == n.f)
	}
	return false
}

func pyTypeName(v any) string {
	for _, t := range []string{"null", "boolean", "string", "array", "object", "integer", "number"} {
		if pyIsType(v, t) {
			return t
		}
	}
	return fmt.Sprintf("%T", v)
}

// renameKeywords moves the keywords of pyKeywords in a decoded schema
// document to their private names. It walks only schema positions, so a
// property that happens to be named "type" is left alone.
func renameKeywords(sch any) {
	obj, ok := sch.(map[string]any)
	if !ok {
		return
	}
	for from, to := range pyKeywords {
		if v, ok := obj[from]; ok {
			delete(obj, from)
			obj[to] = v
		}
	}
	for key, val := range obj {
		switch key {
		case "additionalProperties", "propertyNames", "items", "contains", "not",
			"if", "then", "else", "unevaluatedItems", "unevaluatedProperties",
			"contentSchema", "additionalItems":
			renameKeywords(val)
			if arr, ok := val.([]any); ok && key == "items" { // pre-2020 tuple form
				for _, s := range arr {
					renameKeywords(s)
				}
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if arr, ok := val.([]any); ok {
				for _, s := range arr {
					renameKeywords(s)
				}
			}
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			if m, ok := val.(map[string]any); ok {
				for _, s := range m {
					renameKeywords(s)
				}
			}
		}
	}
}
