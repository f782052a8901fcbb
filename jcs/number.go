package jcs

import (
	"errors"
	"math"
	"strconv"
)

// maxSafeInteger is 2^53-1, the largest integer every IEEE 754 double reader
// receives unchanged.
const maxSafeInteger = 1<<53 - 1

var errNonFinite = errors.New("NaN and Infinity have no JSON form")

// AppendNumber appends the RFC 8785 form of f to dst: the output of
// ECMAScript's Number.prototype.toString. It fails for NaN and ±Inf.
func AppendNumber(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, errNonFinite
	}
	if f == 0 {
		return append(dst, '0'), nil // -0 included
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		if math.Abs(f) <= maxSafeInteger {
			return strconv.AppendInt(dst, int64(f), 10), nil
		}
	}
	// Shortest round-trip digits in scientific form: [-]d[.ddd]e±xx.
	var scratch [32]byte
	sci := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	if sci[0] == '-' {
		dst = append(dst, '-')
		sci = sci[1:]
	}
	var digits [24]byte
	k := 0
	i := 0
	for ; sci[i] != 'e'; i++ {
		if sci[i] != '.' {
			digits[k] = sci[i]
			k++
		}
	}
	exp := 0
	neg := sci[i+1] == '-'
	for _, c := range sci[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if neg {
		exp = -exp
	}
	// ECMAScript names the decimal exponent n with value = 0.d1d2... × 10^n.
	n := exp + 1
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for j := 0; j < n-k; j++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for j := 0; j < -n; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(1-n), 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, int64(n-1), 10)
		}
	}
	return dst, nil
}

// FormatNumber returns the RFC 8785 form of f.
func FormatNumber(f float64) (string, error) {
	b, err := AppendNumber(nil, f)
	return string(b), err
}

// parseNumber converts a syntactically valid JSON number literal and applies
// the interoperability rules in the package documentation. isInt reports a
// literal with neither fraction nor exponent.
func parseNumber(lit []byte, isInt bool) (float64, string) {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		// Only ErrRange is possible for a valid literal: overflow to ±Inf.
		return 0, "magnitude exceeds the largest IEEE 754 double"
	}
	if f == 0 && !isZeroLiteral(lit) {
		return 0, "non-zero value rounds to zero in IEEE 754 double"
	}
	if isInt && math.Abs(f) > maxSafeInteger {
		if why := checkLargeInteger(lit, f); why != "" {
			return 0, why
		}
	}
	return f, ""
}

// checkLargeInteger accepts an integer beyond ±(2^53-1) only when its digits
// are exactly the canonical form of the double it denotes. Then a reader that
// keeps integers exactly and a reader that uses doubles write the same bytes,
// and canonical output (1e20 is written "100000000000000000000") stays valid
// input. Any other such integer reads back changed in one of them.
func checkLargeInteger(digits []byte, f float64) string {
	var scratch [32]byte
	canonical, _ := AppendNumber(scratch[:0], f)
	if string(canonical) == string(digits) {
		return ""
	}
	return "integer beyond ±(2^53-1) reads back as " + string(canonical) + " in IEEE 754 double; send it as a string"
}

// isZeroLiteral reports whether a number literal's significand is all zeros.
func isZeroLiteral(lit []byte) bool {
	for _, c := range lit {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}
