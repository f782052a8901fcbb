package jcs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

var sentinels = []error{jcs.ErrSyntax, jcs.ErrDuplicateKey, jcs.ErrInvalidUTF8, jcs.ErrLoneSurrogate,
	jcs.ErrNumber, jcs.ErrDepth, jcs.ErrSize, jcs.ErrUnsupportedType}

// checkPackageError asserts err is an *jcs.Error wrapping one sentinel.
func checkPackageError(t *testing.T, what string, data []byte, err error) {
	t.Helper()
	var e *jcs.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s(%s): error %v (%T) is not a *jcs.Error", what, clip(string(data)), err, err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			if e.Offset < -1 || e.Offset > len(data) {
				t.Fatalf("%s(%s): offset %d outside the input", what, clip(string(data)), e.Offset)
			}
			return
		}
	}
	t.Fatalf("%s(%s): error %v wraps no sentinel", what, clip(string(data)), err)
}

// checkGeneric asserts v is built only from the generic decoded shapes.
func checkGeneric(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case nil, bool, string, json.Number:
	case []any:
		if v == nil {
			t.Fatalf("Decode produced a nil []any")
		}
		for _, e := range v {
			checkGeneric(t, e)
		}
	case map[string]any:
		if v == nil {
			t.Fatalf("Decode produced a nil map")
		}
		for _, e := range v {
			checkGeneric(t, e)
		}
	default:
		t.Fatalf("Decode produced %T", v)
	}
}

// addSeeds adds the test corpora. Large documents are left out: the fuzzer
// mutates small inputs far more effectively, and minimizing a large
// interesting input stalls it.
func addSeeds(f *testing.F) {
	for _, doc := range validCorpus(f) {
		if len(doc) <= 4096 {
			f.Add(doc)
		}
	}
	for _, tt := range rejectCases {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(nested("[", "]", 64, "1")))
	f.Add([]byte(nested("[", "]", 65, "1")))
}

func FuzzCanonicalize(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := jcs.Canonicalize(data)
		v, derr := jcs.Decode(data)
		if (err == nil) != (derr == nil) {
			t.Fatalf("Canonicalize(%s) error = %v but Decode error = %v", clip(string(data)), err, derr)
		}
		if err != nil {
			checkPackageError(t, "Canonicalize", data, err)
			checkPackageError(t, "Decode", data, derr)
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Canonicalize(%s) = %s is not valid JSON", clip(string(data)), clip(string(out)))
		}
		again, err := jcs.Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonicalize(%s) = %s, which re-canonicalizes to %s, %v", clip(string(data)), clip(string(out)), clip(string(again)), err)
		}
		viaValue, err := jcs.CanonicalizeValue(v)
		if err != nil || !bytes.Equal(viaValue, out) {
			t.Fatalf("CanonicalizeValue(Decode(%s)) = %s, %v; Canonicalize = %s", clip(string(data)), clip(string(viaValue)), err, clip(string(out)))
		}
	})
}

func FuzzDecode(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := jcs.Decode(data)
		c, cerr := jcs.Canonicalize(data)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("Decode(%s) error = %v but Canonicalize error = %v", clip(string(data)), err, cerr)
		}
		if err != nil {
			checkPackageError(t, "Decode", data, err)
			if v != nil {
				t.Fatalf("Decode(%s) returned %#v with an error", clip(string(data)), v)
			}
			return
		}
		checkGeneric(t, v)
		got, err := jcs.CanonicalizeValue(v)
		if err != nil || !bytes.Equal(got, c) {
			t.Fatalf("CanonicalizeValue(Decode(%s)) = %s, %v; Canonicalize = %s", clip(string(data)), clip(string(got)), err, clip(string(c)))
		}
		// The decoded value survives a trip through its canonical text.
		v2, err := jcs.Decode(got)
		if err != nil {
			t.Fatalf("Decode(CanonicalizeValue(Decode(%s)) = %s): %v", clip(string(data)), clip(string(got)), err)
		}
		got2, err := jcs.CanonicalizeValue(v2)
		if err != nil || !bytes.Equal(got2, got) {
			t.Fatalf("second round of %s: %s, %v; want %s", clip(string(data)), clip(string(got2)), err, clip(string(got)))
		}
	})
}
