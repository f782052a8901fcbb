package state

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// argParsers are the payload.args parsers of every state operation, each
// returning the parsed arguments' Map and Validate.
var argParsers = []struct {
	op    Operation
	parse func(map[string]any) (map[string]any, func() error, error)
}{
	{OpGet, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParseGetArgs(m)
		return a.Map(), a.Validate, zeroOr(a, GetArgs{}, err)
	}},
	{OpDelete, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParseDeleteArgs(m)
		return a.Map(), a.Validate, zeroOr(a, DeleteArgs{}, err)
	}},
	{OpSet, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParseSetArgs(m)
		if err != nil && !reflect.DeepEqual(a, SetArgs{}) {
			return nil, nil, errors.New("refused SET args are not the zero value")
		}
		return a.Map(), a.Validate, err
	}},
	{OpQuery, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParseQueryArgs(m)
		if err != nil && !reflect.DeepEqual(a, QueryArgs{}) {
			return nil, nil, errors.New("refused QUERY args are not the zero value")
		}
		return a.Map(), a.Validate, err
	}},
	{OpSnapshot, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParseSnapshotArgs(m)
		if err != nil && !reflect.DeepEqual(a, SnapshotArgs{}) {
			return nil, nil, errors.New("refused SNAPSHOT args are not the zero value")
		}
		return a.Map(), a.Validate, err
	}},
	{OpPurge, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParsePurgeArgs(m)
		return a.Map(), a.Validate, zeroOr(a, PurgeArgs{}, err)
	}},
	{OpGrant, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParseGrantArgs(m)
		return a.Map(), a.Validate, zeroOr(a, GrantArgs{}, err)
	}},
	{OpRevoke, func(m map[string]any) (map[string]any, func() error, error) {
		a, err := ParseRevokeArgs(m)
		return a.Map(), a.Validate, zeroOr(a, RevokeArgs{}, err)
	}},
}

// errNotZero marks a refusal that still returned arguments.
var errNotZero = errors.New("refused args are not the zero value")

func zeroOr[T comparable](a, zero T, err error) error {
	if err != nil && a != zero {
		return errNotZero
	}
	return err
}

// FuzzParseArgs drives every state operation's args parser with the same
// decoded JSON object. A refusal wraps ErrInvalidArgs and returns the zero
// value; accepted arguments validate, and their Map parses back to the same
// arguments (parse → Map → parse is a fixed point, canonically compared);
// the caller's map is never modified.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		`{"key":"agent:acme.alpha/agent/user.profile"}`,
		`{"key":"agent:acme.alpha/agent/user.profile","value":{"a":[1,2.5e3,null]},"scope":"agent","pii_classification":"none"}`,
		`{"key":"agent:acme.alpha/session/s","value":"x","scope":"session","pii_classification":"personal","pii_special_categories":["health"],"expires_at":"2026-01-01T00:00:00.000Z","retention_days":30,"data_residency":"EU","expected_version":2}`,
		`{"key":"agent:acme.alpha/global/x","value":1,"scope":"global","pii_classification":"none"}`,
		`{"scope":"agent","owner_agent_id":"agent:acme.alpha","key_prefix":"agent:acme.alpha/","limit":2000,"offset":0,"created_after":"2026-01-01T00:00:00.000Z"}`,
		`{"limit":0}`,
		`{"as_of":"2026-01-01T00:00:00.000Z","filter":{"scope":"tenant","pii_classification":"sensitive"}}`,
		`{"key":"agent:acme.alpha/agent/x","reason":"GDPR Art. 17"}`,
		`{"key_pattern":"agent:acme.alpha/agent/*","grantee_agent_id":"agent:acme.beta","access_level":"read_write","valid_until":"2027-01-01T00:00:00.000Z"}`,
		`{"grant_id":"0b9f4f3e-8d7c-4b3a-9e1f-2a3b4c5d6e7f"}`,
		`{"key":"agent:acme.alpha/agent/x","extra":true}`,
		`{"key":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := jcs.Decode(data)
		if err != nil {
			return
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return
		}
		before, err := jcs.CanonicalizeValue(m)
		if err != nil {
			return
		}
		for _, p := range argParsers {
			out, validate, err := p.parse(m)
			if after, _ := jcs.CanonicalizeValue(m); !bytes.Equal(before, after) {
				t.Fatalf("%s modified its input:\n%s\n%s", p.op, before, after)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidArgs) {
					t.Fatalf("%s refused %s with %v, which does not wrap ErrInvalidArgs", p.op, data, err)
				}
				continue
			}
			if err := validate(); err != nil {
				t.Fatalf("%s accepted %s but Validate says %v", p.op, data, err)
			}
			enc, err := jcs.CanonicalizeValue(out)
			if err != nil {
				t.Fatalf("%s: accepted args do not encode: %v", p.op, err)
			}
			again, err := jcs.Decode(enc)
			if err != nil {
				t.Fatalf("%s: %v", p.op, err)
			}
			out2, _, err := p.parse(again.(map[string]any))
			if err != nil {
				t.Fatalf("%s accepted %s, but not its own Map %s: %v", p.op, data, enc, err)
			}
			enc2, err := jcs.CanonicalizeValue(out2)
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("%s: parse → Map → parse is not stable:\n%s\n%s (%v)", p.op, enc, enc2, err)
			}
		}
	})
}
