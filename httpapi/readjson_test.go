package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The reviewers' JSON bodies are read like the inbox's: too large is 413,
// too slow is 408 (not 413), cut short is 400.
func TestReadJSONTellsLateFromLarge(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := readJSON(w, r, 64, "a decision"); ok {
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	send := func(t *testing.T, head string, body string, stall bool) int {
		t.Helper()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\n%s", head, body)
		if !stall {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send(t, "Content-Length: 2\r\n", "{}", false); got != 204 {
		t.Errorf("a whole body: %d", got)
	}
	if got := send(t, "Content-Length: 100\r\n", strings.Repeat("x", 100), false); got != 413 {
		t.Errorf("too large: %d, want 413", got)
	}
	if got := send(t, "Content-Length: 50\r\n", `{"a":`, true); got != 408 {
		t.Errorf("stalled: %d, want 408", got)
	}
	if got := send(t, "Content-Length: 50\r\n", `{"a":`, false); got != 400 {
		t.Errorf("cut short: %d, want 400", got)
	}
}
