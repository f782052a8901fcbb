package client

import (
	"net/http"
	"testing"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

// Whatever a signed error envelope holds, reading its status never panics
// and yields a code in range or none.
func FuzzEnvelopeError(f *testing.F) {
	for _, s := range []string{
		`{"payload":{"error":{"code":"forbidden","description":"No.","details":{"agent_status":{"code":4002,"name":"PERMISSION_DENIED"}}}}}`,
		`{"payload":{"error":{"code":"internal_error","details":{"agent_status":{"code":1e3}}}}}`,
		`{"payload":{"error":{"code":"x","details":{"agent_status":{"code":-5,"name":7}}}}}`,
		`{"payload":{"error":[]}}`, `{"payload":"x"}`, `{}`,
		`{"payload":{"error":{"details":{"agent_status":{"code":99999999999999999999}}}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := jcs.Decode([]byte(in))
		if err != nil {
			return
		}
		env, ok := v.(map[string]any)
		if !ok {
			return
		}
		e := envelopeError(403, env)
		if e.Code != 0 && (e.Code < 1000 || e.Code > 9999) {
			t.Fatalf("code %d out of range", e.Code)
		}
		_ = e.Error()
	})
}

func TestRetryAfter(t *testing.T) {
	def := 7 * time.Second
	cases := map[string]time.Duration{"": def, "0": 0, "3": 3 * time.Second, "-1": def, "soon": def, "99999999": 86400 * time.Second,
		"Mon, 02 Jan 2006 15:04:05 GMT": 0}
	for v, want := range cases {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := retryAfter(h, def); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
	if got := retryAfter(nil, def); got != def {
		t.Errorf("no header: %s", got)
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Mon, 02 Jan 2006 15:04:05 GMT", "-3", "1e9", " 5 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{"Retry-After": {v}}
		if d := retryAfter(h, time.Second); d < 0 || d > 86400*time.Second && d != time.Second {
			t.Fatalf("Retry-After %q: %s", v, d)
		}
	})
}
