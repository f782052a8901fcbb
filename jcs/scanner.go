package jcs

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner holds the lexical rules of RFC 8259 plus the I-JSON string rules;
// the canonicalizer and the decoder share it.
type scanner struct {
	data     []byte
	pos      int
	maxDepth int
}

func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) fail(err error, detail string) *Error {
	return &Error{Err: err, Offset: s.pos, Detail: detail}
}

func (s *scanner) unexpected(want string) *Error {
	if s.pos >= len(s.data) {
		return s.fail(ErrSyntax, "unexpected end of input, want "+want)
	}
	r, _ := utf8.DecodeRune(s.data[s.pos:])
	return s.fail(ErrSyntax, "unexpected "+strconv.QuoteRune(r)+", want "+want)
}

// stringToken reads a string starting at its opening quote and returns the
// bytes between the quotes. It checks UTF-8, control characters and escape
// syntax; escaped reports a backslash, in which case the caller must
// unescape (which also pairs surrogates).
func (s *scanner) stringToken() (raw []byte, escaped bool, err *Error) {
	s.pos++ // opening quote
	start := s.pos
	data := s.data
	for i := start; i < len(data); {
		// Eight bytes at a time up to the first that needs a look: all
		// but printable ASCII other than '"' and '\\'.
		for i+8 <= len(data) {
			if m := special8(binary.LittleEndian.Uint64(data[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(data) {
			break
		}
		ch := data[i]
		switch {
		case ch == '"':
			s.pos = i + 1
			return data[start:i], escaped, nil
		case ch == '\\':
			escaped = true
			if i+1 >= len(data) {
				s.pos = i
				return nil, false, s.fail(ErrSyntax, "unterminated string")
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || !isHex4(data[i+2:i+6]) {
					s.pos = i
					return nil, false, s.fail(ErrSyntax, "\\u must be followed by four hex digits")
				}
				i += 6
			default:
				s.pos = i
				return nil, false, s.fail(ErrSyntax, "invalid escape "+strconv.Quote(string(data[i:i+2])))
			}
		case ch < 0x20:
			s.pos = i
			return nil, false, s.fail(ErrSyntax, "control character "+strconv.QuoteRune(rune(ch))+" in string must be escaped")
		case ch < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				s.pos = i
				return nil, false, s.fail(ErrInvalidUTF8, "byte 0x"+strconv.FormatUint(uint64(ch), 16)+" in string")
			}
			i += size
		}
	}
	s.pos = len(data)
	return nil, false, s.fail(ErrSyntax, "unterminated string")
}

// Byte-lane masks for plain8.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// special8 marks, with the top bit of its lane, the bytes of w (eight
// input bytes, little-endian) that are not printable ASCII other than '"'
// and '\\'. Each test is the "some byte is zero" (or "below n") bit trick:
// a borrow may also mark lanes above a true match, but never one below, so
// the result is zero exactly when no byte needs a look and otherwise its
// lowest mark is the first byte that does.
func special8(w uint64) uint64 {
	below20 := (w - lanes01*0x20) & ^w
	quote := w ^ (lanes01 * '"')
	quote = (quote - lanes01) & ^quote
	backslash := w ^ (lanes01 * '\\')
	backslash = (backslash - lanes01) & ^backslash
	return (below20 | quote | backslash | w) & lanes80
}

// unescape appends the decoded form of raw, a string body already checked by
// stringToken, to dst. Offsets in errors point into the input.
func (s *scanner) unescape(dst, raw []byte) ([]byte, *Error) {
	base := s.pos - 1 - len(raw) // offset of raw in data
	for i := 0; i < len(raw); {
		ch := raw[i]
		if ch != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		switch raw[i+1] {
		case 'u':
			r := hex4(raw[i+2 : i+6])
			switch {
			case utf16.IsSurrogate(r):
				if r >= 0xDC00 || i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return dst, &Error{Err: ErrLoneSurrogate, Offset: base + i, Detail: string(raw[i : i+6])}
				}
				lo := hex4(raw[i+8 : i+12])
				if lo < 0xDC00 || lo > 0xDFFF {
					return dst, &Error{Err: ErrLoneSurrogate, Offset: base + i, Detail: string(raw[i : i+6])}
				}
				dst = utf8.AppendRune(dst, utf16.DecodeRune(r, lo))
				i += 12
			default:
				dst = utf8.AppendRune(dst, r)
				i += 6
			}
		case 'b':
			dst = append(dst, '\b')
			i += 2
		case 'f':
			dst = append(dst, '\f')
			i += 2
		case 'n':
			dst = append(dst, '\n')
			i += 2
		case 'r':
			dst = append(dst, '\r')
			i += 2
		case 't':
			dst = append(dst, '\t')
			i += 2
		default: // '"', '\\', '/'
			dst = append(dst, raw[i+1])
			i += 2
		}
	}
	return dst, nil
}

// literal reads true, false or null.
func (s *scanner) literal() (string, *Error) {
	rest := s.data[s.pos:]
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(rest) >= len(lit) && string(rest[:len(lit)]) == lit {
			s.pos += len(lit)
			return lit, nil
		}
	}
	for _, name := range [...]string{"NaN", "Infinity"} {
		if len(rest) >= len(name) && string(rest[:len(name)]) == name {
			return "", s.fail(ErrNumber, name+" is not a JSON number")
		}
	}
	return "", s.unexpected("a value")
}

// numberToken reads a number per the RFC 8259 grammar. -Infinity fails with
// ErrNumber, like NaN and Infinity in literal.
func (s *scanner) numberToken() (lit []byte, isInt bool, err *Error) {
	data := s.data
	start := s.pos
	i := start
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	default:
		if i < len(data) && data[i] == 'I' {
			s.pos = start
			return nil, false, s.fail(ErrNumber, "-Infinity is not a JSON number")
		}
		s.pos = i
		return nil, false, s.unexpected("a digit")
	}
	isInt = true
	if i < len(data) && data[i] == '.' {
		isInt = false
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			s.pos = i
			return nil, false, s.unexpected("a digit after '.'")
		}
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		isInt = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			s.pos = i
			return nil, false, s.unexpected("a digit in the exponent")
		}
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	}
	s.pos = i
	return data[start:i], isInt, nil
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c <= '9':
			r |= rune(c - '0')
		case c >= 'a':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
