package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/client"
)

// fakeReceiver is an ARSIA receiver whose answers a test scripts: it
// publishes a discovery document and a JWKS, and answers the inbox and
// the status URL with what answer returns for each call.
type fakeReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	agent  string
	kid    string
	signer sig.Signer
	// answer is called for every POST to the inbox and GET of a status
	// URL, with the request envelope as posted first.
	answer func(n int, r *http.Request, req map[string]any) (status int, hdr http.Header, body []byte)

	mu     sync.Mutex
	calls  int
	bodies [][]byte
	first  map[string]any
}

func newFakeReceiver(t *testing.T) *fakeReceiver {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sig.NewEd25519Signer(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeReceiver{t: t, agent: "agent:acme.receiver", kid: "agent:acme.receiver#k1", signer: signer}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: f.kid, Algorithm: "EdDSA", Use: "sig"}}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/arsia", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"agent_id": f.agent, "inbox": f.srv.URL + "/v1/arsia/inbox",
			"jwks": "/.well-known/arsia/jwks.json"})
	})
	mux.HandleFunc("GET /.well-known/arsia/jwks.json", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(jwks) })
	serve := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.calls++
		n := f.calls
		if r.Method == http.MethodPost {
			f.bodies = append(f.bodies, body)
			if f.first == nil {
				_ = json.Unmarshal(body, &f.first)
			}
		}
		first := f.first
		f.mu.Unlock()
		status, hdr, out := f.answer(n, r, first)
		for k, v := range hdr {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = w.Write(out)
	}
	mux.HandleFunc("POST /v1/arsia/inbox", serve)
	mux.HandleFunc("GET /v1/arsia/exchanges/{id}", serve)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

var arsiaHeader = http.Header{"Content-Type": {"application/arsia+json; v=1"}}

// sign signs a built reply envelope with the receiver's key.
func (f *fakeReceiver) sign(e *arsia.Envelope, err error) []byte {
	return f.signAs(f.signer, f.kid)(e, err)
}

// signAs signs a built reply envelope with signer and kid.
func (f *fakeReceiver) signAs(signer sig.Signer, kid string) func(*arsia.Envelope, error) []byte {
	return func(e *arsia.Envelope, err error) []byte {
		f.t.Helper()
		if err != nil {
			f.t.Fatal(err)
		}
		m, err := e.Map()
		if err != nil {
			f.t.Fatal(err)
		}
		signed, err := sig.Sign(m, signer, kid)
		if err != nil {
			f.t.Fatal(err)
		}
		b, _ := json.Marshal(signed)
		return b
	}
}

func (f *fakeReceiver) response(req map[string]any, result any) []byte {
	return f.sign(arsia.NewResponse(f.agent, req["from"].(string), req["id"].(string), "com.acme/result", result,
		arsia.BuildOptions{Now: time.Now()}))
}

func (f *fakeReceiver) pending(req map[string]any) []byte {
	return f.sign(arsia.NewPendingApproval(f.agent, req["from"].(string), req["id"].(string),
		arsia.PendingApproval{ActionID: "apr_1", OriginalRequestID: req["id"].(string), Context: "A human must approve it.", RiskLevel: 8},
		arsia.BuildOptions{Now: time.Now()}))
}

func (f *fakeReceiver) errorReply(req map[string]any, e *arsia.Error) []byte {
	return f.sign(arsia.NewError(f.agent, req["from"].(string), req["id"].(string), e, arsia.BuildOptions{Now: time.Now()}))
}

func newTestSender(t *testing.T) *client.Sender {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := sig.NewEd25519Signer(priv.Seed())
	key, err := client.NewKey(signer, "agent:acme.advisor#key-1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := client.NewSender(key, &client.SenderOptions{PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func echoCall(to string) client.Call {
	return client.Call{To: to, Capabilities: []string{"demo.echo"}, Type: "com.acme/echo", Args: map[string]any{"text": "hi"}}
}

// A 429 is retried with the same signed envelope (the receiver answers a
// repeated message id with the first reply), after its Retry-After.
func TestSendRetriesTheSameEnvelope(t *testing.T) {
	f := newFakeReceiver(t)
	f.answer = func(n int, _ *http.Request, req map[string]any) (int, http.Header, []byte) {
		if n == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"0"}, "Content-Type": {"application/problem+json"}},
				[]byte(`{"type":"urn:agent-status:5001","title":"Rate limited","status":429,"agent_status":{"code":5001,"name":"RATE_LIMITED"}}`)
		}
		return 200, arsiaHeader, f.response(req, map[string]any{"ok": true})
	}
	res, err := newTestSender(t).Send(t.Context(), echoCall(f.srv.URL))
	if err != nil || string(res.Result) != `{"ok":true}` {
		t.Fatalf("Send = %+v, %v", res, err)
	}
	if len(f.bodies) != 2 || !bytes.Equal(f.bodies[0], f.bodies[1]) {
		t.Fatalf("posted %d bodies; the retry must repeat the first", len(f.bodies))
	}
}

// A pending approval is followed through the status URL until the final
// reply; every reply is verified, OnPending hears of the wait once.
func TestSendFollowsAPendingApproval(t *testing.T) {
	f := newFakeReceiver(t)
	f.answer = func(n int, r *http.Request, req map[string]any) (int, http.Header, []byte) {
		hdr := http.Header{"Content-Type": {"application/arsia+json; v=1"}, "Custos-Exchange": {"exc_1"}, "Retry-After": {"0"}}
		switch {
		case n == 1:
			return 202, hdr, f.pending(req)
		case r.URL.Path != "/v1/arsia/exchanges/exc_1":
			t.Errorf("polled %s", r.URL.Path)
			return 404, nil, nil
		case n == 2:
			return 202, http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"0"}},
				[]byte(`{"type":"urn:agent-status:1001","title":"Running","status":202,"agent_status":{"code":1001}}`)
		case n == 3:
			return 202, hdr, f.pending(req)
		}
		return 200, arsiaHeader, f.response(req, "done")
	}
	var pendings int
	call := echoCall(f.srv.URL)
	call.OnPending = func(r *client.Result) {
		pendings++
		if r.ApprovalID() != "apr_1" || r.ExchangeID != "exc_1" {
			t.Errorf("OnPending: %+v", r)
		}
	}
	res, err := newTestSender(t).Send(t.Context(), call)
	if err != nil || string(res.Result) != `"done"` || res.ApprovalID() != "apr_1" || res.Code() != asc.Success {
		t.Fatalf("Send = %+v, %v", res, err)
	}
	if pendings != 1 || f.calls != 4 {
		t.Fatalf("OnPending %d times, %d calls", pendings, f.calls)
	}

	// NoWait returns the pending reply itself.
	f.mu.Lock()
	f.calls, f.first = 0, nil
	f.mu.Unlock()
	call.NoWait = true
	res, err = newTestSender(t).Send(t.Context(), call)
	if err != nil || res.Intent != arsia.IntentPendingApproval || res.Code() != asc.HumanApprovalRequired {
		t.Fatalf("NoWait: %+v, %v", res, err)
	}
}

// Replies that cannot be trusted are refused, whatever they say.
func TestSendRefusesUntrustedReplies(t *testing.T) {
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := sig.NewEd25519Signer(otherPriv.Seed())
	cases := map[string]func(f *fakeReceiver, req map[string]any) []byte{
		"signed with an unpublished key": func(f *fakeReceiver, req map[string]any) []byte {
			return f.signAs(other, f.kid)(arsia.NewResponse(f.agent, req["from"].(string), req["id"].(string), "t", "x", arsia.BuildOptions{Now: time.Now()}))
		},
		"signed by another agent": func(f *fakeReceiver, req map[string]any) []byte {
			return f.signAs(other, "agent:acme.mallory#k1")(arsia.NewResponse("agent:acme.mallory", req["from"].(string), req["id"].(string), "t", "x", arsia.BuildOptions{Now: time.Now()}))
		},
		"answering another request": func(f *fakeReceiver, req map[string]any) []byte {
			return f.sign(arsia.NewResponse(f.agent, req["from"].(string), arsia.NewID(), "t", "x", arsia.BuildOptions{Now: time.Now()}))
		},
		"addressed to another sender": func(f *fakeReceiver, req map[string]any) []byte {
			return f.sign(arsia.NewResponse(f.agent, "agent:acme.other", req["id"].(string), "t", "x", arsia.BuildOptions{Now: time.Now()}))
		},
		"altered after signing": func(f *fakeReceiver, req map[string]any) []byte {
			return bytes.Replace(f.response(req, "paid 10"), []byte("paid 10"), []byte("paid 99"), 1)
		},
		"not JSON": func(*fakeReceiver, map[string]any) []byte { return []byte("{") },
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFakeReceiver(t)
			f.answer = func(_ int, _ *http.Request, req map[string]any) (int, http.Header, []byte) {
				return 200, arsiaHeader, reply(f, req)
			}
			res, err := newTestSender(t).Send(t.Context(), echoCall(f.srv.URL))
			if !errors.Is(err, client.ErrUnverified) || res != nil {
				t.Fatalf("Send = %+v, %v; want ErrUnverified", res, err)
			}
		})
	}
}

// Refusals carry their ASC status.
func TestSendRefusals(t *testing.T) {
	cases := []struct {
		name   string
		answer func(f *fakeReceiver, req map[string]any) (int, http.Header, []byte)
		code   asc.Code
		arsia  string
	}{
		{"a signed error with its agent status", func(f *fakeReceiver, req map[string]any) (int, http.Header, []byte) {
			return 500, arsiaHeader, f.errorReply(req, &arsia.Error{Code: arsia.CodeInternalError, Description: "The upstream failed.",
				Details: map[string]any{"agent_status": map[string]any{"code": 5003, "name": "DEPENDENCY_UNAVAILABLE"}}})
		}, asc.DependencyUnavailable, "internal_error"},
		{"a signed error without one", func(f *fakeReceiver, req map[string]any) (int, http.Header, []byte) {
			return 403, arsiaHeader, f.errorReply(req, &arsia.Error{Code: arsia.CodeForbidden, Description: "No grant.",
				Details: map[string]any{"reason": "no_grant"}})
		}, asc.PermissionDenied, "forbidden"},
		{"an unsigned problem (not authenticated)", func(*fakeReceiver, map[string]any) (int, http.Header, []byte) {
			return 401, http.Header{"Content-Type": {"application/problem+json"}},
				[]byte(`{"type":"urn:agent-status:3003","title":"Authentication required","status":401,"detail":"The request could not be authenticated.","agent_status":{"code":3003}}`)
		}, asc.AuthenticationRequired, ""},
		{"a redirect, not followed", func(*fakeReceiver, map[string]any) (int, http.Header, []byte) {
			return 307, http.Header{"Location": {"https://elsewhere.example/inbox"}}, nil
		}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeReceiver(t)
			f.answer = func(_ int, _ *http.Request, req map[string]any) (int, http.Header, []byte) { return tc.answer(f, req) }
			_, err := newTestSender(t).Send(t.Context(), echoCall(f.srv.URL))
			e := client.Status(err)
			if e == nil || e.Code != tc.code || e.ARSIACode != tc.arsia {
				t.Fatalf("Send error = %v (%+v); want ASC %d, ARSIA %q", err, e, tc.code, tc.arsia)
			}
			if tc.arsia != "" && e.Envelope == nil {
				t.Fatal("a signed error without its envelope")
			}
		})
	}
}

// Plain http goes only to loopback hosts unless allowed; nothing is sent.
func TestSendRefusesPlainHTTP(t *testing.T) {
	s := newTestSender(t)
	_, err := s.Send(context.Background(), echoCall("http://receiver.example"))
	if err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Fatalf("Send over plain http = %v", err)
	}
	for _, bad := range []string{"ftp://x", "http://user:pw@127.0.0.1", "http://127.0.0.1/?q=1", "", "://"} {
		if _, err := s.Send(context.Background(), echoCall(bad)); err == nil {
			t.Errorf("Send to %q: no error", bad)
		}
	}
}

func TestNewKey(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := sig.NewEd25519Signer(priv.Seed())
	for _, kid := range []string{"", "agent:acme.x", "agent:acme.x#", "nope#k", "#k"} {
		if _, err := client.NewKey(signer, kid); err == nil {
			t.Errorf("NewKey(%q): no error", kid)
		}
	}
	if _, err := client.NewKey(nil, "agent:acme.x#k"); err == nil {
		t.Error("NewKey without a signer: no error")
	}
	if _, err := client.LoadKey("/nonexistent/key.json"); err == nil {
		t.Error("LoadKey of a missing file: no error")
	}
}
