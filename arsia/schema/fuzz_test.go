package schema

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzValidate feeds arbitrary JSON to the envelope schema: Validate must
// not panic or fail, must be deterministic, and every error must point at
// a value of the instance.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		validEnvelope,
		`{}`, `[]`, `null`, `1e400`, `"x"`,
		`{"v":"1.0","intent":"request","payload":{"type":"a.b/c","args":{},"result":{}},"capabilities":["a.b","a.b"]}`,
		`{"v":"2.0","intent":"pending_approval","payload":{"type":"arsiaprotocol.oversight/pending","args":{"risk_level":11}}}`,
		`{"security":{"alg":"EdDSA","encrypted":true},"payload":"abc.def","compliance":{"retention_days":0.5}}`,
		`{"payload":{"type":"arsiaprotocol.state/nope","data":{"amount":0.07}},"context":{"flags":256,"priority":-1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		errs, err := Validate(v, EnvelopeSchema)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		again, _ := Validate(v, EnvelopeSchema)
		if !slices.Equal(texts(errs), texts(again)) {
			t.Fatalf("not deterministic:\n%q\n%q", texts(errs), texts(again))
		}
		for _, e := range errs {
			if e.Message == "" || e.Keyword == "" {
				t.Fatalf("empty field in %+v", e)
			}
			if _, ok := lookupInstance(v, e.Pointer); !ok {
				t.Fatalf("pointer %q does not resolve in the instance", e.Pointer)
			}
		}
	})
}

// lookupInstance resolves an RFC 6901 pointer in decoded JSON.
func lookupInstance(v any, ptr string) (any, bool) {
	toks, ok := splitPointer(ptr)
	if !ok {
		return nil, false
	}
	for _, tok := range toks {
		switch c := v.(type) {
		case map[string]any:
			if v, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i := 0
			for _, ch := range tok {
				if ch < '0' || ch > '9' {
					return nil, false
				}
				i = i*10 + int(ch-'0')
			}
			if tok == "" || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func splitPointer(ptr string) ([]string, bool) {
	if ptr == "" {
		return nil, true
	}
	if ptr[0] != '/' {
		return nil, false
	}
	var toks []string
	for _, tok := range bytes.Split([]byte(ptr[1:]), []byte("/")) {
		toks = append(toks, unescapeToken(string(tok)))
	}
	return toks, true
}
