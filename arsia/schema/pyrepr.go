package schema

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

// The reference validator is Python's jsonschema, whose messages embed
// Python repr() of instances and schema values. The functions below render
// decoded JSON the way repr() renders what json.loads returns: strings in
// single quotes (double quotes when that avoids escaping), None/True/False,
// ints as ints, floats in Python's shortest round-trip form, lists in
// brackets and dicts in braces.

// orderedObject is a JSON object that remembers its key order. Schema
// values are decoded into it so that repr(schema) lists keys in file order,
// as Python dicts do.
type orderedObject struct {
	keys []string
	vals []any
}

func (o *orderedObject) get(key string) (any, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

// pyRepr renders v like Python's repr(). Go maps have no order, so their
// keys are sorted; orderedObject keeps its own order.
func pyRepr(v any) string {
	var sb strings.Builder
	writeRepr(&sb, v)
	return sb.String()
}

func writeRepr(sb *strings.Builder, v any) {
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
		sb.WriteString(pyString(v))
	case json.Number:
		sb.WriteString(pyNumberText(string(v)))
	case float64:
		sb.WriteString(pyFloat(v))
	case float32:
		sb.WriteString(pyFloat(float64(v)))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		fmt.Fprint(sb, v)
	case []any:
		sb.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeRepr(sb, e)
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
			sb.WriteString(pyString(k))
			sb.WriteString(": ")
			writeRepr(sb, v[k])
		}
		sb.WriteByte('}')
	case *orderedObject:
		sb.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(pyString(k))
			sb.WriteString(": ")
			writeRepr(sb, v.vals[i])
		}
		sb.WriteByte('}')
	default:
		// Not a JSON value; Validate reports it, but a message still needs
		// some text.
		fmt.Fprintf(sb, "<%T %v>", v, v)
	}
}

// pyString is Python's repr of a str.
func pyString(s string) string {
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

// pyNumberText renders a JSON number literal as Python's json module would
// decode and repr it: literals with a fraction or exponent become floats,
// the others ints of any size.
func pyNumberText(lit string) string {
	if isFloatLiteral(lit) {
		f, _ := strconv.ParseFloat(lit, 64) // out of range gives ±Inf, as float() does
		return pyFloat(f)
	}
	if n, ok := new(big.Int).SetString(lit, 10); ok {
		return n.String() // also turns "-0" into "0"
	}
	return lit
}

func isFloatLiteral(lit string) bool {
	return strings.ContainsAny(lit, ".eE")
}

// pyFloat is Python's repr of a float: the shortest digits that round-trip,
// in positional notation when the decimal exponent is in [-4, 16) and in
// scientific notation (two-digit exponent at least) otherwise.
func pyFloat(f float64) string {
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
