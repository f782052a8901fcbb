package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// GET on the agents' endpoint is refused (only POST is served there) with
// what the endpoint is and where the reviewers' inbox is: a page for a
// browser, a problem document for a program.
func TestInboxGuide(t *testing.T) {
	h := newTestInbox(t, 1<<10, nil)
	for _, tc := range []struct {
		accept, ctype string
		want          []string
	}{
		{"text/html,application/xhtml+xml,*/*;q=0.8", "text/html; charset=utf-8", []string{"agents' endpoint", `href="/"`, "/.well-known/arsia", "docs/gateway.md", "POST"}},
		{"", "application/problem+json", []string{"ARSIA inbox", "POST", "Reviewers open /", "docs/gateway.md"}},
		{"application/json", "application/problem+json", []string{"ARSIA inbox"}},
	} {
		req := httptest.NewRequest("GET", "/v1/arsia/inbox", nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" || rec.Header().Get("Content-Type") != tc.ctype {
			t.Errorf("Accept %q: %d, Allow %q, Content-Type %q", tc.accept, rec.Code, rec.Header().Get("Allow"), rec.Header().Get("Content-Type"))
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("Accept %q: the answer lacks %q:\n%s", tc.accept, w, body)
			}
		}
		if tc.ctype == "application/problem+json" {
			var p map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p["status"] != float64(405) {
				t.Errorf("problem document: %v %s", err, body)
			}
		}
	}
	// POST is still the inbox: a wrong media type is 415, not the guide.
	req := httptest.NewRequest("POST", "/v1/arsia/inbox", strings.NewReader("{}"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("POST: %d", rec.Code)
	}
}
