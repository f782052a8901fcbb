package compliance

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxRetentionDays bounds retention periods read from profile files (100
// years), so that date arithmetic on them cannot overflow.
const maxRetentionDays = 36525

// Envelopes reach this package as generic decoded JSON: numbers may be
// json.Number (decoder with UseNumber), float64 (plain encoding/json), or Go
// integers (YAML, hand-built maps). The helpers below accept all of them.

// number returns v as a finite float64.
func number(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(n), 64); err != nil {
			return 0, false
		}
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int8:
		f = float64(n)
	case int16:
		f = float64(n)
	case int32:
		f = float64(n)
	case int64:
		f = float64(n)
	case uint:
		f = float64(n)
	case uint8:
		f = float64(n)
	case uint16:
		f = float64(n)
	case uint32:
		f = float64(n)
	case uint64:
		f = float64(n)
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// integer returns v as an int64 when it is a number with no fractional part
// (JSON Schema's notion of integer: 1827.0 counts) within ±2^53.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return i, true
		}
	}
	f, ok := number(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// isTrue reports whether v is the JSON literal true. Only a real boolean
// counts: "yes" and 1 are type errors that L1 validation rejects.
func isTrue(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

// validResidency reports whether s matches ^[A-Z]{2}$ (an ISO 3166-1
// alpha-2 code or a supranational zone such as EU).
func validResidency(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// maxRendered caps how much of an untrusted value a message quotes.
const maxRendered = 64

// render formats a value for a violation or warning message the way the
// reference SDK's messages read: strings in single quotes, numbers as
// written, other values as compact JSON. Long values are cut.
func render(v any) string {
	switch x := v.(type) {
	case string:
		if utf8.RuneCountInString(x) > maxRendered {
			x = string([]rune(x)[:maxRendered]) + "…"
		}
		q := strconv.Quote(x)
		inner := strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
		return "'" + strings.ReplaceAll(inner, "'", `\'`) + "'"
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		if len(x) > maxRendered {
			return string(x[:maxRendered]) + "…"
		}
		return string(x)
	}
	if f, ok := number(v); ok {
		if i, ok := integer(v); ok {
			return strconv.FormatInt(i, 10)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return "<unprintable>"
	}
	s := string(data)
	if utf8.RuneCountInString(s) > maxRendered {
		s = string([]rune(s)[:maxRendered]) + "…"
	}
	return s
}

// deepCopy copies the JSON containers (map[string]any and []any) of v.
// Scalars, including json.Number, are immutable and shared. Values of other
// Go types are shared as they are: envelopes are generic decoded JSON.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return copyObject(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

func copyObject(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		out[k] = deepCopy(e)
	}
	return out
}
