package arsia

import (
	"encoding/json"
	"github.com/custos-runtime/custos/internal/pyrepr"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// This file holds helpers for the generic JSON shapes (map[string]any,
// []any, string, bool, nil and numbers as json.Number, float64 or Go
// integers) and for Python-repr quoting, which the upstream conformance
// suites grep for in messages.

// numberOf returns v as a float64 when v is a JSON number (never a bool).
func numberOf(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	case float64:
		return n, !math.IsInf(n, 0) && !math.IsNaN(n)
	case float32:
		f := float64(n)
		return f, !math.IsInf(f, 0) && !math.IsNaN(f)
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// integerOf returns v as an int when v is a JSON number with an integral
// value (JSON Schema "integer": 2 and 2.0 both are) that fits comfortably.
func integerOf(v any) (int, bool) {
	f, ok := numberOf(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// stringsOf returns v as a []string when v is an array of strings.
func stringsOf(v any) ([]string, bool) {
	switch a := v.(type) {
	case []string:
		return slices.Clone(a), true
	case []any:
		out := make([]string, 0, len(a))
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// objectOf returns v as a map when v is a JSON object.
func objectOf(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok && m != nil
}

// arrayOf returns v as a []any when v is a JSON array.
func arrayOf(v any) ([]any, bool) {
	switch a := v.(type) {
	case []any:
		return a, a != nil
	case []string:
		out := make([]any, len(a))
		for i, s := range a {
			out[i] = s
		}
		return out, a != nil
	}
	return nil, false
}

// pyRepr renders v the way Python's repr renders the decoded JSON value, so
// that messages read like the reference SDK's ('x', True, None, [1, 2]).
func pyRepr(v any) string { return pyrepr.Repr(v) }

// truncateForMessage keeps messages about hostile input short.
func truncateForMessage(s string) string {
	const limit = 300
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
