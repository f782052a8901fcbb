package relay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

// FuzzRelay drives a relay with any residency zone, remaining lifetime
// and via list, against a recipient that answers any status, media type
// and body. Whatever happens: the outcome is either forwarded (the reply
// as it came, recorded as success) or an error with a wire code; every
// record validates, has its 11 members and no payload; nothing is
// forwarded that is not recorded.
func FuzzRelay(f *testing.F) {
	type answer struct {
		status int
		ct     string
		body   []byte
	}
	var next atomic.Pointer[answer]
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		a := next.Load()
		w.Header().Set("Content-Type", a.ct)
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	}))
	f.Cleanup(srv.Close)
	r, err := New(Options{Broker: brokerEntry("PT", "PT", "EU"), Routes: []Route{{Agent: recipient, Inbox: srv.URL}}, MaxReplyBytes: 512})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("PT", int64(60000), "", 200, "application/arsia+json; v=1", []byte(`{"ok":true}`))
	f.Add("EU", int64(4000), "agent:acme.a", 503, "application/problem+json", []byte(`{}`))
	f.Add("DE", int64(60000), "agent:acme.broker", 200, "text/html", []byte(`<p>`))
	f.Add("", int64(-1), ",,", 302, "", []byte(nil))
	f.Fuzz(func(t *testing.T, zone string, ttlMillis int64, via string, status int, ct string, body []byte) {
		if status < 200 || status > 599 {
			status = 200 + int(uint(status)%400)
		}
		next.Store(&answer{status, ct, body})
		env := map[string]any{"v": "1.0", "id": "4f7d5c2e-8a3b-4b1e-9c6d-2f1e0a9b8c7d", "ts": arsia.FormatTimestamp(t0),
			"from": sender, "to": recipient, "intent": "request", "capabilities": []any{"ledger.read"},
			"payload":    map[string]any{"type": "com.acme/call", "args": map[string]any{"text": "the secret payload"}},
			"compliance": map[string]any{"profile": "GDPR-STANDARD", "data_residency": zone}}
		if ttlMillis >= 0 {
			env["expires_at"] = arsia.FormatTimestamp(t0.Add(time.Duration(ttlMillis%600000) * time.Millisecond))
		}
		raw, _ := json.Marshal(env)
		before := hits.Load()
		out := r.Relay(t.Context(), Request{Route: Route{Agent: recipient, Inbox: srv.URL}, Body: raw, Envelope: env,
			Via: []string{via}, Received: t0, Now: t0})
		forwarded := hits.Load() > before
		if forwarded && out.Record == nil {
			t.Fatal("forwarded without a record")
		}
		if out.Forwarded == (out.Err != nil) {
			t.Fatalf("outcome %+v: forwarded and error both or neither", out)
		}
		if out.Forwarded {
			if out.Status != status || !bytes.Equal(out.Body, body) || out.Record.ForwardingResult != arsia.ForwardingSuccess {
				t.Fatalf("forwarded %d %q, recipient said %d %q", out.Status, out.Body, status, body)
			}
		} else if w := out.Err.WireCode(); w != arsia.CodeServiceUnavailable && w != arsia.CodeInvalidRequest {
			t.Fatalf("refusal %s (%v)", w, out.Err)
		}
		if out.Record == nil {
			return
		}
		if err := out.Record.Validate(); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(out.Record)
		if len(out.Record.Map()) != 11 || bytes.Contains(b, []byte("secret payload")) {
			t.Fatalf("record %s", b)
		}
	})
}
