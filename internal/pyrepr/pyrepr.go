// Package pyrepr renders decoded JSON values the way Python's repr()
// renders what json.loads returns. The ARSIA reference implementation is
// written in Python and its conformance suites match error messages that
// embed such reprs ('from', True, None, ['a', 'b'], 1.5), so every Custos
// package that must reproduce those messages renders values here.
package pyrepr

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Object is a JSON object that keeps its key order, so that its repr lists
// keys in document order as a Python dict does. Go maps have no order;
// Repr sorts their keys.
type Object struct {
	Keys   []string
	Values []any
}

// Get returns the value of key.
func (o *Object) Get(key string) (any, bool) {
	for i, k := range o.Keys {
		if k == key {
			return o.Values[i], true
		}
	}
	return nil, false
}

// maxDepth bounds the nesting Repr renders; deeper values print as "...".
const maxDepth = 32

// Repr renders v like Python's repr(): None/True/False, strings quoted,
// integers as integers of any size, floats in Python's shortest form, lists
// in brackets and dicts in braces.
func Repr(v any) string {
	var sb strings.Builder
	writeRepr(&sb, v, 0)
	return sb.String()
}

func writeRepr(sb *strings.Builder, v any, depth int) {
	if depth > maxDepth {
		sb.WriteString("...")
		return
	}
	switch v := v.(type) {
	case nil:
		sb.WriteString("None")
	case bool:
		if v {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case string:
		sb.WriteString(String(v))
	case json.Number:
		sb.WriteString(Number(string(v)))
	case float64:
		sb.WriteString(Float(v))
	case float32:
		sb.WriteString(Float(float64(v)))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		fmt.Fprint(sb, v)
	case []string:
		sb.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(String(e))
		}
		sb.WriteByte(']')
	case []any:
		sb.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeRepr(sb, e, depth+1)
		}
		sb.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(String(k))
			sb.WriteString(": ")
			writeRepr(sb, v[k], depth+1)
		}
		sb.WriteByte('}')
	case *Object:
		sb.WriteByte('{')
		for i, k := range v.Keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(String(k))
			sb.WriteString(": ")
			writeRepr(sb, v.Values[i], depth+1)
		}
		sb.WriteByte('}')
	default:
		// Not a JSON value; a message about it still needs some text.
		fmt.Fprintf(sb, "<%T>", v)
	}
}

// String is Python's repr of a str: single quotes, or double quotes when
// that avoids escaping a single quote; non-printable characters escaped.
func String(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var sb strings.Builder
	sb.Grow(len(s) + 2)
	sb.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			// Not UTF-8: JSON text cannot produce this, show the byte.
			fmt.Fprintf(&sb, `\x%02x`, s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == '\\':
			sb.WriteString(`\\`)
		case r == rune(quote):
			sb.WriteByte('\\')
			sb.WriteByte(quote)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case unicode.IsPrint(r):
			// unicode.IsPrint matches str.isprintable: letters, marks,
			// numbers, punctuation, symbols and the ASCII space.
			sb.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&sb, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			fmt.Fprintf(&sb, `\U%08x`, r)
		}
	}
	sb.WriteByte(quote)
	return sb.String()
}

// Clipped is String for untrusted text in a message: at most max runes of
// s are shown, ending in "..." inside the quotes when it was longer.
func Clipped(s string, max int) string {
	n := 0
	for i := range s {
		if n == max {
			return String(s[:i] + "...")
		}
		n++
	}
	return String(s)
}

// Number renders a JSON number literal as Python's json module decodes and
// reprs it: a literal with a fraction or exponent becomes a float, any other
// an int of any size.
func Number(lit string) string {
	if strings.ContainsAny(lit, ".eE") {
		f, _ := strconv.ParseFloat(lit, 64) // out of range gives ±Inf, as float() does
		return Float(f)
	}
	if n, ok := new(big.Int).SetString(lit, 10); ok {
		return n.String() // also turns "-0" into "0"
	}
	return lit
}

// Float is Python's repr of a float: the shortest digits that round-trip,
// positional when the decimal exponent is in [-4, 16), scientific (with at
// least two exponent digits) otherwise.
func Float(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "-1.2345e+02"
	mant, expText, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expText)
	decpt := exp + 1 // position of the decimal point after the first digit
	if decpt <= -4 || decpt > 16 {
		return sci // Go and Python agree on "1e+16", "1.5e-07", "5e-324"
	}
	sign := ""
	if mant[0] == '-' {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	switch {
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		return sign + digits[:decpt] + "." + digits[decpt:]
	}
}
