package aais

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Numeric ranges: the value language of the argument_range constraint.
//
// An argument_range member maps a JSON Pointer to a range written as one
// or two comparisons of the word "value" (the number at the pointer) with
// JSON numbers. The grammar (RFC 5234 ABNF; SP is the space character,
// number is the JSON number of RFC 8259 §6):
//
//	range     = *SP ( single / interval ) *SP
//	single    = "value" *SP op *SP number      ; value <= 100
//	          / number *SP op *SP "value"      ; 0 < value
//	interval  = number *SP lt *SP "value" *SP lt *SP number
//	                                           ; 100 <= value < 500
//	op        = "<" / "<=" / ">" / ">=" / "=="
//	lt        = "<" / "<="
//
// A range is read strictly and refused with a precise error when it does
// not fit: an unknown operator ("=<", "!=", "="), a bound that is not a
// JSON number ("1_000", "0x10", "+1", "01", ".5", "NaN", "Infinity"), a
// bound longer than 64 characters, an exponent beyond ±400 or a bound
// whose magnitude exceeds the largest IEEE 754 double (both would make
// the comparison depend on how a consumer rounds), an interval with
// bounds in the wrong order or that holds no number ("5 < value < 5"),
// anything after the range.
//
// Comparison is exact: a bound is the decimal it is written as
// (math/big.Rat of the JSON number text), never rounded through float64,
// so "value >= 100.000000000000000001" does not cover 100 and
// "value < 9007199254740993" covers 9007199254740992. The argument is the
// number in the action as the action digest binds it (its RFC 8785
// canonical form), so the rule judges exactly the value the reviewer's
// digest covers; 1e2 equals 100. An argument that is not a JSON number (a string "50", a
// boolean, null, an object), is not written within the same limits, or is
// missing, fails the constraint: the rule does not match. It is never an
// error at match time and never a panic.

// maxNumberText bounds a number's text; maxExponent its exponent.
const (
	maxNumberText = 64
	maxExponent   = 400
)

// maxDouble is the largest finite IEEE 754 double, as an exact rational.
var maxDouble = new(big.Rat).SetFloat64(math.MaxFloat64)

// errNotNumber is parseDecimal's error for text that is not a JSON number.
var errNotNumber = errors.New("not a JSON number")

// NumericRange is a parsed range: Lower and Upper are nil when unbounded.
// An "==" comparison sets both to the same number, inclusively.
type NumericRange struct {
	Lower, Upper         *big.Rat
	LowerIncl, UpperIncl bool
	text                 string
}

// String returns the range as written (spaces trimmed).
func (r NumericRange) String() string { return r.text }

// Contains reports whether x lies within the range.
func (r NumericRange) Contains(x *big.Rat) bool {
	if x == nil {
		return false
	}
	if r.Lower != nil {
		c := x.Cmp(r.Lower)
		if c < 0 || (c == 0 && !r.LowerIncl) {
			return false
		}
	}
	if r.Upper != nil {
		c := x.Cmp(r.Upper)
		if c > 0 || (c == 0 && !r.UpperIncl) {
			return false
		}
	}
	return true
}

// ParseNumericRange reads a range (see the grammar above).
func ParseNumericRange(s string) (NumericRange, error) {
	toks, err := rangeTokens(s)
	if err != nil {
		return NumericRange{}, err
	}
	r := NumericRange{text: strings.Trim(s, " ")}
	kinds := ""
	for _, t := range toks {
		kinds += string(t.kind)
	}
	switch kinds {
	case "von": // value op number
		n, err := parseBound(toks[2].text)
		if err != nil {
			return NumericRange{}, err
		}
		r.bound(toks[1].text, n, false)
	case "nov": // number op value
		n, err := parseBound(toks[0].text)
		if err != nil {
			return NumericRange{}, err
		}
		r.bound(toks[1].text, n, true)
	case "novon": // number lt value lt number
		if !isLess(toks[1].text) || !isLess(toks[3].text) {
			return NumericRange{}, fmt.Errorf("an interval is written with < or <= on both sides (lower < value < upper), not %s and %s", toks[1].text, toks[3].text)
		}
		lo, err := parseBound(toks[0].text)
		if err != nil {
			return NumericRange{}, err
		}
		hi, err := parseBound(toks[4].text)
		if err != nil {
			return NumericRange{}, err
		}
		r.Lower, r.LowerIncl = lo, toks[1].text == "<="
		r.Upper, r.UpperIncl = hi, toks[3].text == "<="
		c := lo.Cmp(hi)
		if c > 0 || (c == 0 && !(r.LowerIncl && r.UpperIncl)) {
			return NumericRange{}, fmt.Errorf("the interval %s holds no number (the lower bound must be below the upper one)", r.text)
		}
	default:
		return NumericRange{}, errors.New(`want "value OP number", "number OP value" or "number < value < number" (OP one of <, <=, >, >=, ==)`)
	}
	return r, nil
}

// bound applies "value op n" (flipped: "n op value").
func (r *NumericRange) bound(op string, n *big.Rat, flipped bool) {
	if flipped {
		op = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]
	}
	switch op {
	case "<", "<=":
		r.Upper, r.UpperIncl = n, op == "<="
	case ">", ">=":
		r.Lower, r.LowerIncl = n, op == ">="
	case "==":
		r.Lower, r.Upper, r.LowerIncl, r.UpperIncl = n, n, true, true
	}
}

func isLess(op string) bool { return op == "<" || op == "<=" }

type rangeToken struct {
	kind byte // 'v' value, 'o' operator, 'n' number
	text string
}

// rangeTokens splits a range into the word value, operators and number
// texts, refusing any other character or operator.
func rangeTokens(s string) ([]rangeToken, error) {
	if len(s) > 300 {
		return nil, errors.New("a range is at most 300 characters")
	}
	var out []rangeToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ':
			i++
		case strings.IndexByte("<>=!~", c) >= 0:
			j := i
			for j < len(s) && strings.IndexByte("<>=!~", s[j]) >= 0 {
				j++
			}
			op := s[i:j]
			switch op {
			case "<", "<=", ">", ">=", "==":
			default:
				return nil, fmt.Errorf("unknown operator %s (want <, <=, >, >= or ==)", strconv.Quote(op))
			}
			out = append(out, rangeToken{'o', op})
			i = j
		case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || isWordByte(c):
			j := i
			for j < len(s) && (s[j] == '-' || s[j] == '+' || s[j] == '.' || isWordByte(s[j])) {
				j++
			}
			word := s[i:j]
			switch {
			case word == "value":
				out = append(out, rangeToken{'v', word})
			case isLetter(word[0]) && !slices.Contains([]string{"nan", "inf", "infinity"}, strings.ToLower(word)):
				return nil, fmt.Errorf("%s is not a number; the argument is written as the word value (\"value <= 100\")", strconv.Quote(word))
			default:
				out = append(out, rangeToken{'n', word})
			}
			i = j
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			if r == '≤' || r == '≥' || r == '≠' {
				return nil, fmt.Errorf("unknown operator %s (want <, <=, >, >= or ==)", strconv.QuoteRune(r))
			}
			return nil, fmt.Errorf("unexpected character %s at offset %d", strconv.QuoteRune(r), i)
		}
		if len(out) > 5 {
			return nil, errors.New("too many terms: a range is one comparison or one interval")
		}
	}
	return out, nil
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' }

func isWordByte(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
}

// parseBound reads a bound: a JSON number within the limits.
func parseBound(s string) (*big.Rat, error) {
	x, err := parseDecimal(s)
	if err != nil {
		return nil, fmt.Errorf("bound %s: %w", strconv.Quote(s), err)
	}
	return x, nil
}

// parseDecimal reads the text of a JSON number (RFC 8259 §6) exactly:
// at most maxNumberText characters, an exponent within ±maxExponent and a
// magnitude no larger than the largest double. Anything else is an
// error; no float64 is involved.
func parseDecimal(s string) (*big.Rat, error) {
	if len(s) > maxNumberText {
		return nil, fmt.Errorf("longer than %d characters", maxNumberText)
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return nil, notNumber(s)
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return nil, notNumber(s)
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return nil, notNumber(s)
		}
		digits := strings.TrimLeft(s[start:i], "0")
		if len(digits) > 3 {
			return nil, fmt.Errorf("exponent beyond ±%d", maxExponent)
		}
		if e, _ := strconv.Atoi("0" + digits); e > maxExponent {
			return nil, fmt.Errorf("exponent beyond ±%d", maxExponent)
		}
	}
	if i != len(s) {
		return nil, notNumber(s)
	}
	x, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, notNumber(s)
	}
	if new(big.Rat).Abs(x).Cmp(maxDouble) > 0 {
		return nil, errors.New("out of range: its magnitude exceeds the largest IEEE 754 double")
	}
	return x, nil
}

func notNumber(s string) error {
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "nan", "inf", "infinity":
		return fmt.Errorf("%w (NaN and infinities are not numbers)", errNotNumber)
	}
	return errNotNumber
}
