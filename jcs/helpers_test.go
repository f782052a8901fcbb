package jcs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"unicode/utf16"

	"github.com/custos-runtime/custos/jcs"
)

// utf16Less is the reference member-name order of RFC 8785 §3.2.3, computed
// independently of the package: compare the UTF-16 code units of both names.
func utf16Less(a, b string) bool {
	ua := utf16.Encode([]rune(a))
	ub := utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

// mustCanonicalize canonicalizes in and fails the test on error.
func mustCanonicalize(t testing.TB, in []byte) []byte {
	t.Helper()
	out, err := jcs.Canonicalize(in)
	if err != nil {
		t.Fatalf("Canonicalize(%q): %v", in, err)
	}
	return out
}

// checkCanonical asserts Canonicalize(in) == want, and that the decoded route
// (Decode + CanonicalizeValue) agrees byte for byte.
func checkCanonical(t *testing.T, in, want string) {
	t.Helper()
	got, err := jcs.Canonicalize([]byte(in))
	if err != nil {
		t.Fatalf("Canonicalize(%s): unexpected error %v", clip(in), err)
	}
	if string(got) != want {
		t.Fatalf("Canonicalize(%s)\n%s", clip(in), diff(string(got), want))
	}
	v, err := jcs.Decode([]byte(in))
	if err != nil {
		t.Fatalf("Decode(%s): unexpected error %v", clip(in), err)
	}
	got2, err := jcs.CanonicalizeValue(v)
	if err != nil {
		t.Fatalf("CanonicalizeValue(Decode(%s)): unexpected error %v", clip(in), err)
	}
	if !bytes.Equal(got2, got) {
		t.Fatalf("CanonicalizeValue(Decode(%s)) differs from Canonicalize\n%s", clip(in), diff(string(got2), string(got)))
	}
}

// asJCSError unwraps err into *jcs.Error or fails.
func asJCSError(t *testing.T, err error) *jcs.Error {
	t.Helper()
	var e *jcs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *jcs.Error", err, err)
	}
	return e
}

// clip quotes s, shortened for failure messages.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// diff describes where got and want first differ.
func diff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-40)
	return fmt.Sprintf("first difference at byte %d (len got %d, want %d)\n got: ...%s\nwant: ...%s",
		i, len(got), len(want), clip(got[from:min(len(got), i+80)]), clip(want[from:min(len(want), i+80)]))
}

func rawMessage(s string) json.RawMessage { return json.RawMessage(s) }
