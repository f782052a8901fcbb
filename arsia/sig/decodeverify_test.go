package sig

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

// checkSameVerdict runs data through DecodeAndVerify and through
// DecodeEnvelope then Verify, which it must equal: the same error, or the
// same Verified.
func checkSameVerdict(t *testing.T, data []byte, keys KeySource, opts VerifyOptions) *Verified {
	t.Helper()
	ctx := context.Background()
	fast, ferr := DecodeAndVerify(ctx, data, keys, opts)
	var slow *Verified
	env, serr := DecodeEnvelope(data)
	if serr == nil {
		slow, serr = Verify(ctx, env, keys, opts)
	}
	if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
		t.Fatalf("%s:\nDecodeAndVerify error %v\nDecodeEnvelope+Verify error %v", clipBytes(data), ferr, serr)
	}
	if ferr != nil {
		if fast != nil {
			t.Fatalf("error %v with a result", ferr)
		}
		return nil
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%s:\nDecodeAndVerify %+v\nDecodeEnvelope+Verify %+v", clipBytes(data), fast, slow)
	}
	return fast
}

func clipBytes(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// decodeVerifyFixture is a key set and envelopes signed by a key in it,
// in several spellings of the same JSON.
func decodeVerifyFixture(t testing.TB) (KeySource, VerifyOptions, [][]byte) {
	ed, _ := edKey(t, 1)
	keys := static(pubJWK(ed, testFrom+"#ed"))
	at := time.Date(2026, 3, 24, 10, 0, 0, 0, time.UTC)
	opts := VerifyOptions{Algorithms: allAlgs, Now: func() time.Time { return at }}
	env := testEnvelope()
	env["payload"].(map[string]any)["args"] = map[string]any{
		"amount": json.Number("8542.0"), "big": json.Number("1e21"), "tiny": json.Number("1E-7"),
		"text": "café \u2028 <&> \"q\" \\ \n \x01 😀", "list": []any{json.Number("-0"), json.Number("100"), nil, true},
		"nested": map[string]any{"€": 1, "😀": 2, "security": map[string]any{"sig": "not this one"}},
	}
	signed := mustSign(t, env, ed, testFrom+"#ed")
	canonical, err := jcs.CanonicalizeValue(signed)
	if err != nil {
		t.Fatal(err)
	}
	marshalled, err := json.Marshal(signed) // escapes <&>: not canonical
	if err != nil {
		t.Fatal(err)
	}
	indented, err := json.MarshalIndent(signed, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// security moved to the front, and to the only place.
	sec, _ := json.Marshal(signed["security"])
	secFirst := []byte(`{"security":` + string(sec) + "," + string(bytes.Replace(canonical[1:], []byte(`,"security":`+string(sec)), nil, 1)))
	return keys, opts, [][]byte{canonical, marshalled, indented, secFirst,
		[]byte(`{"security":` + string(sec) + `}`),
		[]byte(`{"from":"agent:acme.billing","security":` + string(sec) + `}`),
	}
}

func TestDecodeAndVerifyMatchesSteps(t *testing.T) {
	keys, opts, docs := decodeVerifyFixture(t)
	for i, doc := range docs {
		v := checkSameVerdict(t, doc, keys, opts)
		if i < 4 && v == nil {
			t.Fatalf("spelling %d of a signed envelope did not verify: %s", i, clipBytes(doc))
		}
	}
	canonical := docs[0]
	// Every single-byte change: most break the signature or the JSON,
	// some (white space, escapes) change nothing; both routes must agree.
	for i := range canonical {
		for _, c := range []byte{' ', '0', 'a', '"', '\\', '}', 0xff} {
			doc := bytes.Clone(canonical)
			doc[i] = c
			checkSameVerdict(t, doc, keys, opts)
		}
	}
	for _, doc := range [][]byte{nil, []byte(`[]`), []byte(`null`), []byte(`{"a":1,"a":2}`),
		[]byte(`{"security":1,"security":2}`), bytes.Repeat([]byte(" "), MaxEnvelopeBytes+1)} {
		checkSameVerdict(t, doc, keys, opts)
	}
	// Same meaning, other spellings: still the signed envelope.
	for _, r := range [][2]string{{`:1e+21`, `:1e21`}, {`é`, `\u00e9`}, {`\n`, `\u000a`}, {`,100,`, `,1e2,`}, {`:1e-7`, `:0.0000001`}, {`"v":"1.0"`, `"v" : "1.0"`}} {
		doc := bytes.Replace(canonical, []byte(r[0]), []byte(r[1]), 1)
		if bytes.Equal(doc, canonical) {
			t.Fatalf("%s not found in the envelope", r[0])
		}
		if checkSameVerdict(t, doc, keys, opts) == nil {
			t.Fatalf("respelling %s as %s broke the signature", r[0], r[1])
		}
	}
}

// FuzzDecodeAndVerify starts from signed envelopes whose key is in the set,
// so that mutations reach both the verifying and the refusing paths, and
// requires DecodeAndVerify to agree with DecodeEnvelope then Verify.
func FuzzDecodeAndVerify(f *testing.F) {
	keys, opts, docs := decodeVerifyFixture(f)
	for _, doc := range docs {
		f.Add(doc)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameVerdict(t, data, keys, opts)
	})
}
