package jcs

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Decode decodes data strictly into the generic shapes: map[string]any,
// []any, string, json.Number (the literal as written, so no precision is lost
// before canonicalization), bool and nil.
func Decode(data []byte) (any, error) {
	return (*Options)(nil).Decode(data)
}

// Decode is the package-level Decode under o's limits.
func (o *Options) Decode(data []byte) (any, error) {
	maxDepth, maxSize := o.limits()
	if err := checkSize(data, maxSize); err != nil {
		return nil, err
	}
	d := decoder{scanner: scanner{data: data, maxDepth: maxDepth}}
	d.skipSpace()
	v, err := d.value(0)
	if err == nil {
		d.skipSpace()
		if d.pos != len(d.data) {
			err = d.fail(ErrSyntax, "data after the top-level value")
		}
	}
	if err != nil {
		return nil, err.finish()
	}
	return v, nil
}

type decoder struct {
	scanner
}

func (d *decoder) value(depth int) (any, *Error) {
	switch ch := d.peek(); {
	case ch == '{':
		return d.object(depth + 1)
	case ch == '[':
		return d.array(depth + 1)
	case ch == '"':
		return d.str()
	case ch == '-' || ('0' <= ch && ch <= '9'):
		start := d.pos
		lit, isInt, err := d.numberToken()
		if err != nil {
			return nil, err
		}
		if _, why := parseNumber(lit, isInt); why != "" {
			return nil, &Error{Err: ErrNumber, Offset: start, Detail: string(lit) + ": " + why}
		}
		return json.Number(lit), nil
	}
	lit, err := d.literal()
	switch lit {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return nil, err
}

func (d *decoder) str() (string, *Error) {
	raw, escaped, err := d.stringToken()
	if err != nil {
		return "", err
	}
	if !escaped {
		return string(raw), nil
	}
	b, err := d.unescape(make([]byte, 0, len(raw)), raw)
	return string(b), err
}

func (d *decoder) array(depth int) (any, *Error) {
	if depth > d.maxDepth {
		return nil, d.fail(ErrDepth, "more than "+strconv.Itoa(d.maxDepth)+" nested containers")
	}
	d.pos++
	out := []any{}
	d.skipSpace()
	if d.peek() == ']' {
		d.pos++
		return out, nil
	}
	for i := 0; ; i++ {
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return nil, err.within(strconv.Itoa(i))
		}
		out = append(out, v)
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return out, nil
		default:
			return nil, d.unexpected("',' or ']'").within(strconv.Itoa(i))
		}
	}
}

func (d *decoder) object(depth int) (any, *Error) {
	if depth > d.maxDepth {
		return nil, d.fail(ErrDepth, "more than "+strconv.Itoa(d.maxDepth)+" nested containers")
	}
	d.pos++
	out := map[string]any{}
	d.skipSpace()
	if d.peek() == '}' {
		d.pos++
		return out, nil
	}
	for {
		d.skipSpace()
		if d.peek() != '"' {
			return nil, d.unexpected("a member name")
		}
		nameAt := d.pos
		name, err := d.str()
		if err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, (&Error{Err: ErrDuplicateKey, Offset: nameAt, Detail: strconv.Quote(name)}).within(name)
		}
		d.skipSpace()
		if d.peek() != ':' {
			return nil, d.unexpected("':'").within(name)
		}
		d.pos++
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return nil, err.within(name)
		}
		out[name] = v
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return out, nil
		default:
			return nil, d.unexpected("',' or '}'").within(name)
		}
	}
}

// CanonicalizeValue returns the canonical form of an already decoded value.
// See the package documentation for the accepted types.
func CanonicalizeValue(v any) ([]byte, error) {
	return (*Options)(nil).AppendValue(nil, v)
}

// DigestValue is Digest for an already decoded value.
func DigestValue(v any) (string, error) {
	c, err := CanonicalizeValue(v)
	if err != nil {
		return "", err
	}
	return DigestCanonical(c), nil
}

// AppendValue appends the canonical form of v to dst under o's depth limit.
func (o *Options) AppendValue(dst []byte, v any) ([]byte, error) {
	maxDepth, _ := o.limits()
	w := valueWriter{opts: o, maxDepth: maxDepth, out: dst}
	start := len(dst)
	if err := w.value(v, 0); err != nil {
		return dst[:start], err.finish()
	}
	return w.out, nil
}

type valueWriter struct {
	opts     *Options
	maxDepth int
	out      []byte
}

func (w *valueWriter) fail(err error, detail string) *Error {
	return &Error{Err: err, Offset: -1, Detail: detail}
}

func (w *valueWriter) value(v any, depth int) *Error {
	switch v := v.(type) {
	case nil:
		w.out = append(w.out, "null"...)
	case bool:
		w.out = strconv.AppendBool(w.out, v)
	case string:
		if !utf8.ValidString(v) {
			return w.fail(ErrInvalidUTF8, "string value")
		}
		w.out = appendString(w.out, []byte(v))
	case float64:
		return w.float(v)
	case float32:
		return w.float(float64(v))
	case int:
		return w.integer(int64(v))
	case int8:
		return w.integer(int64(v))
	case int16:
		return w.integer(int64(v))
	case int32:
		return w.integer(int64(v))
	case int64:
		return w.integer(v)
	case uint:
		return w.unsigned(uint64(v))
	case uint8:
		return w.unsigned(uint64(v))
	case uint16:
		return w.unsigned(uint64(v))
	case uint32:
		return w.unsigned(uint64(v))
	case uint64:
		return w.unsigned(v)
	case json.Number:
		s := scanner{data: []byte(v)}
		lit, isInt, err := s.numberToken()
		if err != nil || s.pos != len(s.data) {
			return w.fail(ErrSyntax, "json.Number "+strconv.Quote(string(v))+" is not a JSON number")
		}
		f, why := parseNumber(lit, isInt)
		if why != "" {
			return w.fail(ErrNumber, string(v)+": "+why)
		}
		return w.float(f)
	case json.RawMessage:
		_, maxSize := w.opts.limits()
		out, err := appendCanonical(w.out, v, w.maxDepth-depth, maxSize)
		if err != nil {
			err.Offset = -1 // offsets inside a fragment mislead
			return err
		}
		w.out = out
	case []any:
		if depth+1 > w.maxDepth {
			return w.fail(ErrDepth, "more than "+strconv.Itoa(w.maxDepth)+" nested containers")
		}
		w.out = append(w.out, '[')
		for i, e := range v {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			if err := w.value(e, depth+1); err != nil {
				return err.within(strconv.Itoa(i))
			}
		}
		w.out = append(w.out, ']')
	case map[string]any:
		if depth+1 > w.maxDepth {
			return w.fail(ErrDepth, "more than "+strconv.Itoa(w.maxDepth)+" nested containers")
		}
		ms := make([]member, 0, len(v))
		for k := range v {
			if !utf8.ValidString(k) {
				return w.fail(ErrInvalidUTF8, "member name")
			}
			ms = append(ms, member{name: []byte(k)})
		}
		sortMembers(ms)
		w.out = append(w.out, '{')
		for i, m := range ms {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			w.out = appendString(w.out, m.name)
			w.out = append(w.out, ':')
			if err := w.value(v[string(m.name)], depth+1); err != nil {
				return err.within(string(m.name))
			}
		}
		w.out = append(w.out, '}')
	default:
		return w.fail(ErrUnsupportedType, fmt.Sprintf("%T (decode into generic values or pass json.RawMessage)", v))
	}
	return nil
}

func (w *valueWriter) float(f float64) *Error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return w.fail(ErrNumber, strconv.FormatFloat(f, 'g', -1, 64)+" has no JSON form")
	}
	w.out, _ = AppendNumber(w.out, f)
	return nil
}

func (w *valueWriter) integer(i int64) *Error {
	digits := strconv.AppendInt(nil, i, 10)
	if i > maxSafeInteger || i < -maxSafeInteger {
		if why := checkLargeInteger(digits, float64(i)); why != "" {
			return w.fail(ErrNumber, string(digits)+": "+why)
		}
	}
	w.out = append(w.out, digits...)
	return nil
}

func (w *valueWriter) unsigned(u uint64) *Error {
	digits := strconv.AppendUint(nil, u, 10)
	if u > maxSafeInteger {
		if why := checkLargeInteger(digits, float64(u)); why != "" {
			return w.fail(ErrNumber, string(digits)+": "+why)
		}
	}
	w.out = append(w.out, digits...)
	return nil
}
