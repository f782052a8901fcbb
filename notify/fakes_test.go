package notify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSlack is a loopback Slack Web API: it checks what Slack checks (the
// bot token, a JSON body) and answers as Slack documents
// (https://api.slack.com/methods/chat.postMessage and chat.update,
// chat.postEphemeral, views.open).
type fakeSlack struct {
	srv   *httptest.Server
	token string
	mu    sync.Mutex
	calls []slackCall
	n     int
}

type slackCall struct {
	Method string
	Args   map[string]any
	Raw    string
}

func newFakeSlack(t *testing.T, token string) *fakeSlack {
	f := &fakeSlack{token: token}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		method := strings.TrimPrefix(r.URL.Path, "/api/")
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			fmt.Fprint(w, `{"ok":false,"error":"invalid_auth"}`)
			return
		}
		if r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			fmt.Fprint(w, `{"ok":false,"error":"invalid_content_type"}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var args map[string]any
		if err := json.Unmarshal(b, &args); err != nil {
			fmt.Fprint(w, `{"ok":false,"error":"invalid_json"}`)
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, slackCall{Method: method, Args: args, Raw: string(b)})
		f.n++
		n := f.n
		f.mu.Unlock()
		switch method {
		case "chat.postMessage":
			if args["channel"] == nil || args["blocks"] == nil {
				fmt.Fprint(w, `{"ok":false,"error":"no_text"}`)
				return
			}
			fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":"1700000000.%06d","message":{}}`, args["channel"], n)
		case "chat.update":
			fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, args["channel"], args["ts"])
		case "chat.postEphemeral":
			fmt.Fprint(w, `{"ok":true,"message_ts":"1700000000.999999"}`)
		case "views.open":
			if args["trigger_id"] == "" {
				fmt.Fprint(w, `{"ok":false,"error":"invalid_trigger_id"}`)
				return
			}
			fmt.Fprint(w, `{"ok":true,"view":{"id":"V1"}}`)
		default:
			fmt.Fprint(w, `{"ok":false,"error":"unknown_method"}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) api() string { return f.srv.URL + "/api/" }

// of returns the calls of a method.
func (f *fakeSlack) of(method string) []slackCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// fakeSMTP is a minimal SMTP server (RFC 5321: greeting, EHLO, MAIL,
// RCPT, DATA, QUIT) on a loopback port, keeping the messages it receives.
type fakeSMTP struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []smtpMessage
}

type smtpMessage struct {
	From string
	To   []string
	Data string
}

func newFakeSMTP(t *testing.T) *fakeSMTP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSMTP{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return f
}

func (f *fakeSMTP) addr() string { return f.ln.Addr().String() }

func (f *fakeSMTP) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	say := func(s string) { fmt.Fprintf(c, "%s\r\n", s) }
	say("220 fake.test ESMTP")
	var m smtpMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(line)
		switch {
		case strings.HasPrefix(verb, "EHLO"), strings.HasPrefix(verb, "HELO"):
			say("250-fake.test")
			say("250 8BITMIME")
		case strings.HasPrefix(verb, "MAIL FROM:"):
			m = smtpMessage{From: angle(line)}
			say("250 OK")
		case strings.HasPrefix(verb, "RCPT TO:"):
			m.To = append(m.To, angle(line))
			say("250 OK")
		case verb == "DATA":
			if m.From == "" || len(m.To) == 0 {
				say("503 need MAIL and RCPT")
				continue
			}
			say("354 end with .")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(strings.TrimPrefix(l, "."))
			}
			m.Data = data.String()
			f.mu.Lock()
			f.msgs = append(f.msgs, m)
			f.mu.Unlock()
			say("250 queued")
		case verb == "RSET", verb == "NOOP":
			say("250 OK")
		case verb == "QUIT":
			say("221 bye")
			return
		default:
			say("502 not implemented")
		}
	}
}

// angle is the <address> of a MAIL or RCPT command (which may carry
// parameters after it: BODY=8BITMIME).
func angle(line string) string {
	_, rest, _ := strings.Cut(line, "<")
	addr, _, _ := strings.Cut(rest, ">")
	return addr
}

func (f *fakeSMTP) messages() []smtpMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]smtpMessage(nil), f.msgs...)
}

// webhookSink is a Standard Webhooks receiver: it verifies every delivery,
// fails the first attempt of each with 503 to exercise the retries, and
// keeps each webhook-id once.
type webhookSink struct {
	srv      *httptest.Server
	secret   WebhookSecret
	mu       sync.Mutex
	attempts map[string]int
	events   map[string]WebhookEvent
	order    []string
	bad      int
}

func newWebhookSink(t *testing.T, secret WebhookSecret) *webhookSink {
	s := &webhookSink{secret: secret, attempts: map[string]int{}, events: map[string]WebhookEvent{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id, err := VerifyWebhook(r.Header, b, time.Now(), s.secret)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.bad++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		s.attempts[id]++
		if s.attempts[id] == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		if _, dup := s.events[id]; dup {
			w.WriteHeader(http.StatusOK)
			return
		}
		var ev WebhookEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		s.events[id] = ev
		s.order = append(s.order, id)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *webhookSink) got(id string) (WebhookEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.events[id]
	return ev, ok
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
