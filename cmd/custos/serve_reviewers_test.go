package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/routes"
	"github.com/custos-runtime/custos/store/memstore"
)

func passwordHash(t *testing.T, pw string) string {
	t.Helper()
	cmd := newServePasswordCommand()
	var out strings.Builder
	cmd.SetIn(strings.NewReader(pw + "\n"))
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`password_hash:\s+"(\$argon2id\$[^"]+)"`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("serve password printed %q", out.String())
	}
	return m[1]
}

func TestServePassword(t *testing.T) {
	h := passwordHash(t, "a long passphrase")
	p, err := httpapi.NewPasswords([]httpapi.PasswordEntry{{Actor: aais.Actor{ID: "a", Type: aais.ActorHuman}, Hash: h}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Verify("a", "a long passphrase"); !ok {
		t.Fatal("the printed hash does not verify")
	}
	for _, in := range []string{"", "short\n"} {
		cmd := newServePasswordCommand()
		cmd.SetIn(strings.NewReader(in))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
	cmd := newServePasswordCommand()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--generate"})
	if err := cmd.Execute(); err != nil || !strings.Contains(out.String(), "password: ") || !strings.Contains(out.String(), "$argon2id$") {
		t.Fatalf("--generate: %v %s", err, out.String())
	}
}

func TestReviewerConfigChecks(t *testing.T) {
	h := passwordHash(t, "a long passphrase")
	for yaml, want := range map[string]string{
		"roles: {r: {}}\n":                                                   "grants nothing",
		"roles: {r: {profiles: [NOPE]}}\n":                                   "unknown compliance profile",
		"separation_of_duties: [NOPE]\n":                                     "unknown compliance profile",
		"reviewers: [{id: a}]\n":                                             "no credentials",
		"reviewers: [{id: admin, password_hash: '" + h + "'}]\n":             "reserved",
		"reviewers: [{id: a, password_hash: plain}]\n":                       "argon2id or bcrypt",
		"reviewers: [{id: a, password_hash: '" + h + "', roles: [ghost]}]\n": "unknown role",
	} {
		c := config.Default()
		if err := c.Decode(strings.NewReader(yaml), "test"); err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", yaml, err, want)
		}
	}
}

// The reviewer surfaces as custos serve mounts them: the inbox at "/" ahead
// of the gateway's own handler, sign-in with a password or the printed
// login token, and the configured roles.
func TestReviewerSurfacesMount(t *testing.T) {
	h := passwordHash(t, "alice's passphrase")
	c := config.Default()
	yaml := `
reviewers:
  - id: alice
    display_name: Alice Example
    roles: [finance]
    password_hash: "` + h + `"
roles:
  finance: {capabilities: ["billing.*"], profiles: [MIFID-II]}
separation_of_duties: [MIFID-II]
justification_required: [MIFID-II]
`
	if err := c.Decode(strings.NewReader(yaml), "test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	auth, err := aais.NewAuthority(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	surfaces, token, err := newReviewerSurfaces(c, auth, st, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := routes.New()
	surfaces.mount(mux)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(cl *http.Client, path string) (*http.Response, string) {
		t.Helper()
		resp, err := cl.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get(srv.Client(), "/"); resp.StatusCode != 200 || !strings.Contains(body, "Custos approvals") ||
		resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	if resp, _ := get(srv.Client(), "/ui/app.js"); resp.StatusCode != 200 {
		t.Fatalf("GET /ui/app.js: %d", resp.StatusCode)
	}
	for _, p := range []string{"/v1/arsia/inbox", "/healthz", "/index.html"} {
		if resp, _ := get(srv.Client(), p); resp.StatusCode != http.StatusTeapot {
			t.Fatalf("GET %s did not reach the gateway handler: %d", p, resp.StatusCode)
		}
	}

	login := func(body string) map[string]any {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		cl := &http.Client{Jar: jar, Timeout: 10 * time.Second}
		req, _ := http.NewRequest("POST", srv.URL+"/login", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", srv.URL)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != 200 {
			t.Fatalf("login %s: %d %v", body, resp.StatusCode, err)
		}
		if resp, body := get(cl, "/approvals/me"); resp.StatusCode != 200 {
			t.Fatalf("me: %d %s", resp.StatusCode, body)
		}
		return ans
	}
	alice := login(`{"id":"alice","password":"alice's passphrase"}`)
	if alice["actor"].(map[string]any)["authenticated_by"] != "session/password" || alice["roles"].([]any)[0] != "finance" {
		t.Fatalf("alice: %v", alice)
	}
	admin := login(`{"token":"` + token + `"}`)
	if admin["actor"].(map[string]any)["id"] != "admin" || admin["roles"].([]any)[0] != adminRole {
		t.Fatalf("admin: %v", admin)
	}
	// Other reviewer endpoints authenticate the same way.
	r := httptest.NewRequest("GET", "/v1/reviews", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	if a, err := surfaces.auth.Authenticate(r); err != nil || a.ID != "admin" {
		t.Fatalf("surfaces.auth: %+v %v", a, err)
	}
	// The printed token is also a bearer API token.
	req, _ := http.NewRequest("GET", srv.URL+"/approvals/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := srv.Client().Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("bearer: %v %v", resp, err)
	}
}
