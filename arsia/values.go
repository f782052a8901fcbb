package arsia

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
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
func pyRepr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

func writeRepr(b *strings.Builder, v any, depth int) {
	if depth > 32 {
		b.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		writeStrRepr(b, x)
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			if f, ok := numberOf(x); ok {
				b.WriteString(pyFloat(f))
				return
			}
		}
		b.WriteString(string(x))
	case float64:
		b.WriteString(pyFloat(x))
	case float32:
		b.WriteString(pyFloat(float64(x)))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1)
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, x[k], depth+1)
		}
		b.WriteByte('}')
	default:
		if f, ok := numberOf(v); ok {
			if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				b.WriteString(strconv.FormatInt(int64(f), 10))
			} else {
				b.WriteString(pyFloat(f))
			}
			return
		}
		b.WriteString("<?>")
	}
}

// pyFloat formats f as Python's repr(float): shortest round-trip digits,
// fixed notation with a ".0" for exponents in [-4, 16), else 1e+16 style.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		return mant + "e" + sign + es
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func writeStrRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
			i++
			continue
		}
		i += size
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(quote):
			b.WriteByte('\\')
			b.WriteByte(quote)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case r < 0x80 || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case r <= 0xffff:
			b.WriteString(`\u`)
			b.WriteString(hexN(uint32(r), 4))
		default:
			b.WriteString(`\U`)
			b.WriteString(hexN(uint32(r), 8))
		}
	}
	b.WriteByte(quote)
}

func hex2(c byte) string { return hexN(uint32(c), 2) }

func hexN(v uint32, n int) string {
	s := strconv.FormatUint(uint64(v), 16)
	for len(s) < n {
		s = "0" + s
	}
	return s
}

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
