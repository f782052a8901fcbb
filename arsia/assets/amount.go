package assets

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Limits of ParseAmount. They keep hostile input from costing memory or
// time: no real amount comes close to them.
const (
	// MaxAmountTextLength is the longest amount text accepted, in bytes.
	MaxAmountTextLength = 512
	// MaxAmountIntegerDigits is the most integer digits an amount may have
	// once its exponent is applied. float64 tops out at 309 digits, so no
	// JSON peer could represent more.
	MaxAmountIntegerDigits = 309
	// MaxAmountScale is the most fraction digits an amount may have once its
	// exponent is applied (trailing zeros excluded). Every asset type allows
	// far fewer; beyond this the text is refused rather than represented.
	MaxAmountScale = 400
)

var bigTen = big.NewInt(10)

// Amount is an exact decimal number: an integer coefficient and a count of
// fraction digits (the scale), with no trailing fraction zeros, so 100.50,
// 100.5 and 1.005e2 are the same Amount. It never goes through binary
// floating point. The zero value is 0.
//
// Amount is immutable: its methods return new values and never modify the
// receiver, so Amounts can be copied and shared freely.
type Amount struct {
	coef  *big.Int // nil means 0; never modified after construction
	scale int      // fraction digits, 0..MaxAmountScale
}

// ParseAmount parses the text of a JSON number ("100.50", "-3", "1e-8",
// "2.5E+3") into an exact Amount. Anything else fails with ErrInvalidAmount:
// leading '+', leading zeros ("01"), a bare '.', hexadecimal, "NaN",
// "Infinity", surrounding spaces, and texts beyond the package limits
// (MaxAmountTextLength, MaxAmountIntegerDigits, MaxAmountScale).
func ParseAmount(s string) (Amount, error) {
	if len(s) > MaxAmountTextLength {
		return Amount{}, fmt.Errorf("%w: amount text is %d bytes long, more than %d", ErrInvalidAmount, len(s), MaxAmountTextLength)
	}
	neg, intPart, fracPart, exp, ok := splitJSONNumber(s)
	if !ok {
		return Amount{}, fmt.Errorf("%w: %q is not a JSON number", ErrInvalidAmount, s)
	}
	// The value is digits × 10^(exp - len(fracPart)); fold it into a
	// coefficient and a non-negative scale, dropping insignificant zeros.
	digits := strings.TrimLeft(intPart+fracPart, "0")
	shift := exp - len(fracPart) // power of ten applied to digits
	if digits == "" {
		return Amount{}, nil
	}
	trimmed := strings.TrimRight(digits, "0")
	shift += len(digits) - len(trimmed)
	digits = trimmed
	if intDigits := len(digits) + shift; intDigits > MaxAmountIntegerDigits {
		return Amount{}, fmt.Errorf("%w: amount has more than %d integer digits", ErrInvalidAmount, MaxAmountIntegerDigits)
	}
	scale := 0
	if shift < 0 {
		scale = -shift
		if scale > MaxAmountScale {
			return Amount{}, fmt.Errorf("%w: amount has %d decimal places, beyond any supported precision (%d)", ErrInvalidAmount, scale, MaxAmountScale)
		}
	} else {
		digits += strings.Repeat("0", shift)
	}
	coef, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return Amount{}, fmt.Errorf("%w: %q is not a JSON number", ErrInvalidAmount, s)
	}
	if neg {
		coef.Neg(coef)
	}
	return Amount{coef: coef, scale: scale}, nil
}

// splitJSONNumber checks s against the JSON number grammar (RFC 8259 §6)
// and returns its parts. exp is bounded so that it cannot overflow.
func splitJSONNumber(s string) (neg bool, intPart, fracPart string, exp int, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false, "", "", 0, false
	}
	intPart = s[start:i]
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false, "", "", 0, false
		}
		fracPart = s[start:i]
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false, "", "", 0, false
		}
		// The text is at most MaxAmountTextLength bytes, so an exponent
		// beyond 100000 can only describe a number outside the limits;
		// clamping keeps the arithmetic exact without overflow.
		for _, c := range s[start:i] {
			exp = min(exp*10+int(c-'0'), 100000)
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return false, "", "", 0, false
	}
	return neg, intPart, fracPart, exp, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// AmountFromJSON converts a decoded JSON number into an Amount: a
// json.Number is parsed from its text; a float64 (or float32) from its
// shortest round-trip decimal form, so the YAML or JSON literal 100.50
// becomes exactly 100.5 and the sum 0.1+0.2 becomes
// 0.30000000000000004; Go integers exactly. Strings are refused (a wire
// amount is a JSON number; use ParseAmount for text), as are NaN and the
// infinities. Failures wrap ErrInvalidAmount.
func AmountFromJSON(v any) (Amount, error) {
	switch x := v.(type) {
	case json.Number:
		return ParseAmount(string(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Amount{}, fmt.Errorf("%w: %v is not a finite number", ErrInvalidAmount, x)
		}
		return ParseAmount(strconv.FormatFloat(x, 'g', -1, 64))
	case float32:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return Amount{}, fmt.Errorf("%w: %v is not a finite number", ErrInvalidAmount, x)
		}
		return ParseAmount(strconv.FormatFloat(f, 'g', -1, 32))
	case int:
		return AmountFromInt(int64(x)), nil
	case int8:
		return AmountFromInt(int64(x)), nil
	case int16:
		return AmountFromInt(int64(x)), nil
	case int32:
		return AmountFromInt(int64(x)), nil
	case int64:
		return AmountFromInt(x), nil
	case uint:
		return Amount{coef: new(big.Int).SetUint64(uint64(x))}.norm(), nil
	case uint8:
		return AmountFromInt(int64(x)), nil
	case uint16:
		return AmountFromInt(int64(x)), nil
	case uint32:
		return AmountFromInt(int64(x)), nil
	case uint64:
		return Amount{coef: new(big.Int).SetUint64(x)}.norm(), nil
	case nil:
		return Amount{}, fmt.Errorf("%w: amount is null", ErrInvalidAmount)
	}
	return Amount{}, fmt.Errorf("%w: amount is a %s, not a number", ErrInvalidAmount, jsonTypeName(v))
}

// AmountFromInt returns the integer n as an Amount.
func AmountFromInt(n int64) Amount {
	return Amount{coef: big.NewInt(n)}.norm()
}

// MustParseAmount is ParseAmount for constants known to be valid; it
// panics otherwise. Use it only with literals.
func MustParseAmount(s string) Amount {
	a, err := ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// norm restores the invariant: zero has a nil coefficient, and no other
// value has a trailing fraction zero.
func (a Amount) norm() Amount {
	if a.coef == nil || a.coef.Sign() == 0 {
		return Amount{}
	}
	if a.scale == 0 {
		return a
	}
	c := new(big.Int).Set(a.coef)
	r := new(big.Int)
	q := new(big.Int)
	for a.scale > 0 {
		q.QuoRem(c, bigTen, r)
		if r.Sign() != 0 {
			break
		}
		c, q = q, c
		a.scale--
	}
	a.coef = c
	return a
}

// Sign returns -1, 0 or +1.
func (a Amount) Sign() int {
	if a.coef == nil {
		return 0
	}
	return a.coef.Sign()
}

// IsZero reports whether a is 0.
func (a Amount) IsZero() bool { return a.Sign() == 0 }

// Scale returns the number of significant fraction digits: 0 for 100 and
// 100.00, 1 for 100.50, 8 for 0.00000001.
func (a Amount) Scale() int { return a.scale }

// FitsPrecision reports whether a has at most places fraction digits.
func (a Amount) FitsPrecision(places int) bool { return a.scale <= places }

// scaled returns a's coefficient at the given scale (≥ a.scale).
func (a Amount) scaled(scale int) *big.Int {
	c := new(big.Int)
	if a.coef != nil {
		c.Set(a.coef)
	}
	if d := scale - a.scale; d > 0 {
		c.Mul(c, new(big.Int).Exp(bigTen, big.NewInt(int64(d)), nil))
	}
	return c
}

// Cmp compares a and b: -1 if a < b, 0 if equal, +1 if a > b.
func (a Amount) Cmp(b Amount) int {
	s := max(a.scale, b.scale)
	return a.scaled(s).Cmp(b.scaled(s))
}

// Equal reports whether a and b are the same number.
func (a Amount) Equal(b Amount) bool { return a.Cmp(b) == 0 }

// Add returns a + b, exactly.
func (a Amount) Add(b Amount) Amount {
	s := max(a.scale, b.scale)
	return Amount{coef: new(big.Int).Add(a.scaled(s), b.scaled(s)), scale: s}.norm()
}

// Sub returns a - b, exactly.
func (a Amount) Sub(b Amount) Amount {
	s := max(a.scale, b.scale)
	return Amount{coef: new(big.Int).Sub(a.scaled(s), b.scaled(s)), scale: s}.norm()
}

// Rat returns a as a new big.Rat.
func (a Amount) Rat() *big.Rat {
	den := new(big.Int).Exp(bigTen, big.NewInt(int64(a.scale)), nil)
	return new(big.Rat).SetFrac(a.scaled(a.scale), den)
}

// String returns a in plain decimal notation without exponent or trailing
// fraction zeros: "100.5", "0.00000001", "-3". The text is also a valid
// JSON number that ParseAmount reads back as a.
func (a Amount) String() string {
	if a.coef == nil {
		return "0"
	}
	digits := new(big.Int).Abs(a.coef).String()
	sign := ""
	if a.coef.Sign() < 0 {
		sign = "-"
	}
	if a.scale == 0 {
		return sign + digits
	}
	if len(digits) <= a.scale {
		digits = strings.Repeat("0", a.scale-len(digits)+1) + digits
	}
	cut := len(digits) - a.scale
	return sign + digits[:cut] + "." + digits[cut:]
}

// StringFixed returns a with exactly places fraction digits ("100.50" for
// 100.5 at 2). It fails with ErrPrecision when a has more fraction digits
// than places: it never rounds.
func (a Amount) StringFixed(places int) (string, error) {
	if places < 0 || !a.FitsPrecision(places) {
		return "", fmt.Errorf("%w: %s has %d decimal places, more than %d", ErrPrecision, a, a.scale, places)
	}
	s := a.String()
	if places == 0 {
		return s, nil
	}
	frac := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		frac = len(s) - i - 1
	} else {
		s += "."
	}
	return s + strings.Repeat("0", places-frac), nil
}

// Number returns a as a json.Number, for building JSON documents that keep
// the amount exact.
func (a Amount) Number() json.Number { return json.Number(a.String()) }

// MarshalJSON writes a as a JSON number in plain decimal notation.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON reads a JSON number, or a JSON string holding one (the
// "100.00" convention of some money APIs), exactly.
func (a *Amount) UnmarshalJSON(data []byte) error {
	text := string(data)
	if len(text) >= 2 && text[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidAmount, err)
		}
		text = s
	}
	v, err := ParseAmount(text)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// jsonTypeName names the JSON type of a decoded value, for messages.
func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number, float64, float32, int, int64, int32:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}
