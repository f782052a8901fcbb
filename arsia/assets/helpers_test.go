package assets

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

// validRequest returns fresh, valid transfer request args.
func validRequest() map[string]any {
	return map[string]any{
		"amount":            100.50,
		"currency_or_unit":  "EUR",
		"asset_type":        "currency",
		"from_agent":        "agent:acme.alpha",
		"to_agent":          "agent:acme.beta",
		"payment_reference": "pay-001",
		"description":       "Test transfer",
		"idempotency_key":   "idem-001",
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := maps.Clone(m)
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == deleteMember {
			delete(out, k)
			continue
		}
		out[k] = kv[i+1]
	}
	return out
}

type deleteMarker struct{}

var deleteMember = deleteMarker{}

// wantProblems checks a validator's result: ok means none; otherwise one
// must contain keyword (case-insensitive) and, when sentinel is set, wrap it.
func wantProblems(t *testing.T, name string, errs []*Error, ok bool, keyword string, sentinel error) {
	t.Helper()
	if ok {
		if len(errs) > 0 {
			t.Errorf("%s: unexpected problems: %v", name, Join(errs))
		}
		return
	}
	if len(errs) == 0 {
		t.Errorf("%s: no problem reported", name)
		return
	}
	for _, e := range errs {
		if strings.Contains(strings.ToLower(e.Error()), strings.ToLower(keyword)) && (sentinel == nil || errors.Is(e, sentinel)) {
			return
		}
	}
	t.Errorf("%s: no problem matches %q / %v: %v", name, keyword, sentinel, Join(errs))
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func amt(s string) *Amount {
	a := MustParseAmount(s)
	return &a
}
