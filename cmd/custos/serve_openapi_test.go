package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	stdjson "encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	validator "github.com/pb33f/libopenapi-validator"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/httpapi/openapi/openapitest"
	"github.com/custos-runtime/custos/internal/routes"
)

// openAPIGateway runs custos serve with every surface configured (the
// reviewers' API and inbox, reviews, AG-UI, a Slack channel and a webhook
// channel with decisions coming back) and hands back its mux.
func openAPIGateway(t *testing.T) (*gatewayUnderTest, *routes.Mux, string) {
	t.Helper()
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true,"channel":"C0PS","ts":"1700000000.000100"}`)
	}))
	t.Cleanup(fake.Close)
	code, out, _ := custos(t, "", "serve", "token")
	tok := regexp.MustCompile(`token:\s+([0-9a-f]+)`).FindStringSubmatch(out)
	hash := regexp.MustCompile(`token_sha256:\s+(sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || tok == nil || hash == nil {
		t.Fatalf("serve token: %d %s", code, out)
	}
	secret := func(s string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(s)) }
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"policy_version": "1", "token_lifetime_seconds": 900, "capabilities": [{"capability": "demo.echo", "status": "allowed"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sink := make(chan *routes.Mux, 1)
	ctx := context.WithValue(context.Background(), routesKey{}, (chan<- *routes.Mux)(sink))
	g := startGatewayIn(t, ctx, filepath.Join(t.TempDir(), "data"), nil,
		"reviewers:\n  - id: alice\n    display_name: Alice Example\n    token_sha256: "+hash[1]+"\n",
		"authorization_server: {enabled: true}\n",
		"notifications:\n  slack:\n    - name: ops\n      channel: C0PS\n      token: xoxb-openapi-test\n      signing_secret: openapi-signing-secret\n"+
			"      api: "+fake.URL+"/api/\n      users: {UALICE: alice}\n"+
			"  webhooks:\n    - {name: siem, url: \""+fake.URL+"/hook\", secret: \""+secret("delivery-secret-0123456789")+
			"\", callback_secret: \""+secret("callback-secret-0123456789")+"\", reviewers: {\"jira:alice\": alice}}\n",
		"certificate_authority:\n  enabled: true\n  operators: [alice]\n",
		"onboarding:\n  enabled: true\n  policy_file: "+policy+"\n  discovery_urls: [\"https://agents.partner.example/\"]\n",
		"relay:\n  enabled: true\n  jurisdiction: PT\n  residency_zones: [PT]\n  routes:\n    - agent: agent:acme.ledger\n      inbox: "+fake.URL+"/inbox\n")
	t.Cleanup(g.stop)
	select {
	case m := <-sink:
		return g, m, tok[1]
	default:
		t.Fatal("serve did not hand over its mux")
	}
	return nil, nil, ""
}

// segments splits a path template; a {wildcard} becomes "{}".
func segments(p string) []string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			parts[i] = "{}"
		}
	}
	return parts
}

// servedBy reports whether the documented path template doc is what the
// mux's route path serves: the same segments, a documented {wildcard}
// standing for any one segment (a channel's configured name, say), and a
// route ending in "/" (a subtree) serving the documented paths one
// segment below it.
func servedBy(doc, route string) bool {
	d, r := segments(doc), segments(route)
	if len(r) > 2 && r[len(r)-1] == "" && len(d) == len(r) {
		r[len(r)-1] = "{}"
	}
	if len(d) != len(r) {
		return false
	}
	for i := range d {
		if d[i] != r[i] && d[i] != "{}" {
			return false
		}
	}
	return true
}

type documented struct{ method, path string }

func documentedOperations(t *testing.T, doc []byte) []documented {
	t.Helper()
	var top struct {
		Paths map[string]map[string]stdjson.RawMessage `json:"paths"`
	}
	if err := stdjson.Unmarshal(doc, &top); err != nil {
		t.Fatal(err)
	}
	var out []documented
	for p, item := range top.Paths {
		for m := range item {
			switch m {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out = append(out, documented{strings.ToUpper(m), p})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path+out[i].method < out[j].path+out[j].method })
	return out
}

func fetch(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
	}
	return b
}

// TestOpenAPIRoutesBothWays: every route the real mux of custos serve
// registers is documented in the /openapi.json it serves, and every
// documented operation is a route it registers.
func TestOpenAPIRoutesBothWays(t *testing.T) {
	g, mux, _ := openAPIGateway(t)
	doc := fetch(t, g.url+"/openapi.json")
	ops := documentedOperations(t, doc)
	served := mux.Routes()
	if len(served) < 30 {
		t.Fatalf("only %d routes listed: %v", len(served), served)
	}
	for _, r := range served {
		if r.Method == "" {
			t.Errorf("%s is registered without a method: register it as METHOD /path, or make its handler list its routes (routes.Lister)", r.Path)
			continue
		}
		if !slices.ContainsFunc(ops, func(o documented) bool { return o.method == r.Method && servedBy(o.path, r.Path) }) {
			t.Errorf("%s %s is served but not in the OpenAPI document", r.Method, r.Path)
		}
	}
	for _, o := range ops {
		if !slices.ContainsFunc(served, func(r routes.Route) bool { return o.method == r.Method && servedBy(o.path, r.Path) }) {
			t.Errorf("%s %s is documented but custos serve has no such route", o.method, o.path)
		}
	}
	// The comparison itself can fail: a made-up operation is not served.
	if slices.ContainsFunc(served, func(r routes.Route) bool { return servedBy("/v1/arsia/nothing/{id}", r.Path) }) {
		t.Error("servedBy matches a path nobody serves")
	}
}

// recordedCall is one recorded request and its answer.
type recordedCall struct {
	req  *http.Request
	body []byte
	resp *http.Response
	data []byte
}

type recorder struct {
	t     *testing.T
	base  string
	token string
	got   []recordedCall
}

// do sends a request and records it with its answer. Options are
// header "Name: value" strings; "bearer" adds the reviewer's token.
func (r *recorder) do(method, path string, body []byte, headers ...string) recordedCall {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), method, r.base+path, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, h := range headers {
		if h == "bearer" {
			req.Header.Set("Authorization", "Bearer "+r.token)
			continue
		}
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		r.t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	x := recordedCall{req: req, body: body, resp: resp, data: data}
	r.got = append(r.got, x)
	return x
}

func (r *recorder) want(x recordedCall, code int) recordedCall {
	r.t.Helper()
	if x.resp.StatusCode != code {
		r.t.Fatalf("%s %s: %d, want %d: %s", x.req.Method, x.req.URL.Path, x.resp.StatusCode, code, x.data)
	}
	return x
}

// TestOpenAPIRecordedAnswersValidate drives the real server in-process
// through its endpoints, success and error answers alike, and validates
// every recorded response (and every request that succeeded) against
// the served document with libopenapi-validator.
func TestOpenAPIRecordedAnswersValidate(t *testing.T) {
	g, _, aliceToken := openAPIGateway(t)
	doc := fetch(t, g.url+"/openapi.json")
	schemas := map[string][]byte{}
	for _, m := range regexp.MustCompile(`"openapi/schemas/([a-z0-9.-]+\.json)`).FindAllSubmatch(doc, -1) {
		name := string(m[1])
		if _, ok := schemas[name]; !ok {
			schemas[name] = fetch(t, g.url+"/openapi/schemas/"+name)
		}
	}
	v, err := openapitest.Load(t.TempDir(), doc, schemas)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{t: t, base: g.url, token: aliceToken}
	json := "Content-Type: application/json"

	rec.want(rec.do("GET", "/healthz", nil), 200)
	rec.want(rec.do("GET", "/readyz", nil), 200)
	rec.want(rec.do("GET", "/metrics", nil), 200)
	rec.want(rec.do("GET", "/.well-known/arsia", nil), 200)
	rec.want(rec.do("GET", "/.well-known/arsia/jwks.json", nil), 200)
	rec.want(rec.do("GET", "/.well-known/arsia/brokers?residency=PT", nil), 200)
	rec.want(rec.do("GET", "/.well-known/arsia/brokers?residency=DE", nil), 200)
	rec.want(rec.do("GET", "/.well-known/arsia/brokers", nil), 400)
	rec.want(rec.do("GET", "/openapi.json", nil), 200)
	rec.want(rec.do("GET", "/openapi/schemas/agent-status.schema.json", nil), 200)
	rec.want(rec.do("GET", "/openapi/schemas/nope.json", nil), 404)
	rec.want(rec.do("GET", "/", nil), 200)
	rec.want(rec.do("GET", "/ui/profiles.json", nil), 200)

	// The ARSIA inbox: a call that runs at once, one that waits for a
	// human (202 pending_approval), and the errors around them.
	signed := func(capability, profile string, args any) []byte {
		t.Helper()
		opts := arsia.BuildOptions{Now: time.Now()}
		if profile != "" {
			opts.Compliance = map[string]any{"profile": profile}
		}
		e, err := arsia.NewRequest(sender, "agent:acme.gateway", []string{capability}, "com.acme/call", args, opts)
		if err != nil {
			t.Fatal(err)
		}
		env, err := e.Map()
		if err != nil {
			t.Fatal(err)
		}
		msg, err := sig.Sign(env, g.signer, g.kid)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := stdjson.Marshal(msg)
		return b
	}
	arsiaCT := "Content-Type: application/arsia+json; v=1"
	rec.want(rec.do("POST", "/v1/arsia/inbox", signed("demo.echo", "", map[string]any{"x": 1}), arsiaCT), 200)
	pending := rec.want(rec.do("POST", "/v1/arsia/inbox", signed("billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "1.00"}), arsiaCT), 202)
	xid := pending.resp.Header.Get("Custos-Exchange")
	rec.want(rec.do("GET", "/v1/arsia/exchanges/"+xid, nil), 202)
	rec.want(rec.do("GET", "/v1/arsia/exchanges/"+xid+"/decision", nil), 404)
	rec.want(rec.do("GET", "/v1/arsia/exchanges/no-such-exchange", nil), 404)
	rec.want(rec.do("POST", "/v1/arsia/inbox", []byte(`{}`), json), 415)
	tampered := bytes.Replace(signed("demo.echo", "", map[string]any{"x": 1}), []byte(`"x":1`), []byte(`"x":2`), 1)
	if x := rec.do("POST", "/v1/arsia/inbox", tampered, arsiaCT); x.resp.StatusCode < 400 {
		t.Fatalf("a tampered request: %d %s", x.resp.StatusCode, x.data)
	}
	rec.want(rec.do("GET", "/v1/arsia/inbox", nil), 405)
	rec.want(rec.do("GET", "/v1/arsia/inbox", nil, "Accept: text/html"), 405)

	// The approvals API: 401 without credentials, the list, and a decision.
	rec.want(rec.do("GET", "/approvals/snapshot", nil), 401)
	snap := rec.want(rec.do("GET", "/approvals/snapshot", nil, "bearer"), 200)
	m, err := aais.Parse(snap.data)
	if err != nil || len(m.Snapshot.Pending) != 1 {
		t.Fatalf("snapshot: %s (%v)", snap.data, err)
	}
	pendingReq := m.Snapshot.Pending[0]
	rec.want(rec.do("GET", "/approvals/me", nil, "bearer"), 200)
	rec.want(rec.do("GET", "/approvals/"+pendingReq.ID+"/permission", nil, "bearer"), 200)
	rec.want(rec.do("GET", "/approvals/no-such-request/permission", nil, "bearer"), 404)
	rec.want(rec.do("GET", "/approvals/history?limit=0", nil, "bearer"), 400)
	rec.want(rec.do("GET", "/approvals/rules", nil, "bearer"), 200)
	rec.want(rec.do("POST", "/approvals/rules/no-such-rule/revoke", nil, "bearer"), 404)
	rec.want(rec.do("POST", "/approvals/"+pendingReq.ID+"/decisions", []byte(`{"not":"aais"}`), "bearer", json), 400)
	d, err := aais.NewDecision(&pendingReq, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce,
		Actor: aais.Actor{ID: "x", Type: aais.ActorHuman}, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	dm, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
	decided, _ := aais.Marshal(dm)
	rec.want(rec.do("POST", "/approvals/"+pendingReq.ID+"/decisions", decided, "bearer", json), 200)
	if code, reply := g.awaitFinal(t, xid); code != 200 || reply["intent"] != "response" {
		t.Fatalf("after the approval: %d %v", code, reply)
	}
	rec.want(rec.do("GET", "/v1/arsia/exchanges/"+xid, nil), 200)
	rec.want(rec.do("GET", "/v1/arsia/exchanges/"+xid+"/decision", nil), 200)
	rec.want(rec.do("GET", "/approvals/history", nil, "bearer"), 200)

	// The event stream: its opening snapshot event.
	rec.got = append(rec.got, firstEvent(t, g.url+"/approvals/events", aliceToken))

	// Reviews, submissions, AG-UI, sign-in and channel callbacks.
	rec.want(rec.do("GET", "/v1/reviews", nil, "bearer"), 200)
	rec.want(rec.do("GET", "/v1/reviews?state=sideways", nil, "bearer"), 400)
	rec.want(rec.do("GET", "/v1/reviews/no-such-exchange", nil, "bearer"), 404)
	rec.want(rec.do("GET", "/v1/reviews", nil), 401)
	rec.want(rec.do("GET", "/approvals/requests/no-such-request", nil, "bearer"), 404)
	rec.want(rec.do("POST", "/approvals/requests", []byte(`{}`), "bearer", json), 400)
	rec.want(rec.do("POST", "/agui/resume", []byte(`{}`), json), 401)
	rec.want(rec.do("POST", "/agui/resume", []byte(`{}`), "bearer", json), 400)
	origin := "Origin: " + g.url
	rec.want(rec.do("POST", "/login", []byte(`{"token":"0000"}`), json, origin), 401)
	rec.want(rec.do("POST", "/login", []byte(`{"token":"0000"}`), json, "Origin: https://elsewhere.example"), 403)
	rec.want(rec.do("POST", "/login", []byte(fmt.Sprintf(`{"token":%q}`, g.token)), json, origin), 200)
	rec.want(rec.do("POST", "/logout", nil, origin), 204)
	rec.want(rec.do("POST", "/notify/webhook/siem/decisions", []byte(`{}`), json,
		"webhook-id: msg_1", "webhook-timestamp: 1", "webhook-signature: v1,AAAA"), 401)

	// The certificate authority.
	rec.want(rec.do("GET", "/v1/arsia/ca/root.pem", nil), 200)
	caKey, _ := arsia.NewSigningJWK("agent:acme.bot#key-1", ed25519.NewKeyFromSeed(make([]byte, 32)).Public())
	caJWK, _ := stdjson.Marshal(caKey)
	issueBody := []byte(`{"agent_id":"agent:acme.bot","public_key":` + string(caJWK) + `}`)
	rec.want(rec.do("POST", "/v1/arsia/ca/certificates", issueBody, json), 401)
	rec.want(rec.do("POST", "/v1/arsia/ca/certificates", []byte(`{"agent_id":"agent:acme.bot","public_key":`+string(caJWK)+`,"trust_level":"L3"}`), "bearer", json), 403)
	rec.want(rec.do("POST", "/v1/arsia/ca/certificates", []byte(`{"agent_id":"x"}`), "bearer", json), 400)
	issued := rec.want(rec.do("POST", "/v1/arsia/ca/certificates", issueBody, "bearer", json), 201)
	var cert struct{ Serial string }
	if err := stdjson.Unmarshal(issued.data, &cert); err != nil || cert.Serial == "" {
		t.Fatalf("issued: %v %s", err, issued.data)
	}
	rec.want(rec.do("GET", "/v1/arsia/ca/certificates?limit=10", nil, "bearer"), 200)
	rec.want(rec.do("GET", "/v1/arsia/ca/certificates?limit=0", nil, "bearer"), 400)
	rec.want(rec.do("GET", "/v1/arsia/ca/certificates/"+cert.Serial, nil, "bearer"), 200)
	rec.want(rec.do("GET", "/v1/arsia/ca/certificates/abc", nil, "bearer"), 404)
	rec.want(rec.do("POST", "/v1/arsia/ca/certificates/"+cert.Serial+"/revoke", []byte(`{"reason":"test"}`), "bearer", json), 200)

	if len(rec.got) < 40 {
		t.Fatalf("only %d answers recorded", len(rec.got))
	}
	for _, x := range rec.got {
		resp := &http.Response{StatusCode: x.resp.StatusCode, Header: x.resp.Header, Body: io.NopCloser(bytes.NewReader(x.data)), Request: x.req}
		req := x.req.Clone(context.Background())
		req.Body = io.NopCloser(bytes.NewReader(x.body))
		if ok, errs := v.ValidateHttpResponse(req, resp); !ok {
			t.Errorf("%s %s → %d does not match the document:%s\n  body: %.300s", x.req.Method, x.req.URL.RequestURI(), x.resp.StatusCode, openapitest.Describe(errs), x.data)
		}
		if x.resp.StatusCode < 300 {
			req.Body = io.NopCloser(bytes.NewReader(x.body))
			if ok, errs := v.ValidateHttpRequestSync(req); !ok {
				t.Errorf("%s %s: the request does not match the document:%s", x.req.Method, x.req.URL.RequestURI(), openapitest.Describe(errs))
			}
		}
	}
	checkValidatorRejects(t, v, g.url)
}

// firstEvent opens the SSE stream and records it up to its first event.
func firstEvent(t *testing.T, u, token string) recordedCall {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		buf.WriteString(sc.Text() + "\n")
		if sc.Text() == "" && strings.Contains(buf.String(), "data:") {
			break
		}
	}
	if !strings.Contains(buf.String(), "event: approval.snapshot") {
		t.Fatalf("the stream did not open with a snapshot: %q", buf.String())
	}
	return recordedCall{req: req, resp: resp, data: buf.Bytes()}
}

// checkValidatorRejects: the validation above can fail. Answers that
// break the document (a problem without its ASC status, a snapshot that
// is not AAIS, an undocumented status) are refused.
func checkValidatorRejects(t *testing.T, v validator.Validator, base string) {
	t.Helper()
	for _, c := range []struct {
		method, path string
		code         int
		ct, body     string
	}{
		{"GET", "/approvals/snapshot", 401, "application/problem+json", `{"type":"about:blank","title":"x","status":401}`},
		{"GET", "/approvals/snapshot", 200, "application/json", `{"aais":"1.0","type":"approval.snapshot"}`},
		{"GET", "/healthz", 418, "text/plain", "ok\n"},
		{"GET", "/.well-known/arsia", 200, "application/json", `{"name":"no agent id"}`},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		resp := &http.Response{StatusCode: c.code, Header: http.Header{"Content-Type": {c.ct}},
			Body: io.NopCloser(strings.NewReader(c.body)), Request: req}
		if ok, _ := v.ValidateHttpResponse(req, resp); ok {
			t.Errorf("%s %s → %d %s was accepted", c.method, c.path, c.code, c.body)
		}
	}
}
