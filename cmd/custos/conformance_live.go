package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/arsia/onboarding"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/conformance"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/onboard"
	"github.com/custos-runtime/custos/httpapi"
)

// The live conformance runner: the cases upstream gates behind a live
// platform service, played against a custos serve started in this
// process with those services on (state, the certificate authority),
// over HTTP, as an outside agent would.

const (
	// liveAgent is the agent the state cases' keys belong to.
	liveAgent   = "agent:external.demo"
	liveGateway = "agent:custos.conformance"
	// liveL2 and liveL3 are discovered peers whose identity records carry
	// a chain of the gateway's CA, and of a stand-in qualified provider.
	liveL2 = "agent:external.certified"
	liveL3 = "agent:external.qualified"
)

// livePeer is an agent the runner plays on loopback: its metadata, JWKS
// and signed identity record (with a certificate chain once set).
type livePeer struct {
	agent, kid string
	priv       ed25519.PrivateKey
	signer     sig.Signer
	srv        *http.Server
	url        string
	mu         sync.Mutex
	chain      []string
	// seen are the paths requested, in order; fault makes one endpoint
	// fail ("discovery": 404, "identity-signature": signed by another
	// key).
	seen  []string
	fault string
}

func newLivePeer(agent string) (*livePeer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	p := &livePeer{agent: agent, kid: agent + "#key-1", priv: priv}
	if p.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.url = "http://" + ln.Addr().String()
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *livePeer) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: p.priv.Public(), KeyID: p.kid, Algorithm: "EdDSA", Use: "sig"}
}

func (p *livePeer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	p.mu.Lock()
	p.seen = append(p.seen, r.URL.Path)
	fault := p.fault
	p.mu.Unlock()
	switch r.URL.Path {
	case "/.well-known/arsia":
		if fault == "discovery" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"agent_id": p.agent, "name": "conformance peer", "version": "1.0",
			"protocol_version": "1.0", "inbox": p.url + "/v1/arsia/inbox", "jwks": "/.well-known/arsia/jwks.json",
			"capabilities_supported": []string{"demo.echo"}, "max_message_bytes": 1048576, "request_timeout_ms": 30000,
			"server_min": "1.0", "server_max": "1.0"})
	case "/.well-known/arsia/jwks.json":
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{p.jwk()}})
	case "/.well-known/arsia/identity":
		rec := map[string]any{"agent_id": p.agent, "owner_id": "PT509876543", "owner_name": "Conformance", "jurisdiction": "PT",
			"ai_system_classification": "limited-risk", "contact_email": "ops@conformance.example",
			"created_at": arsia.FormatTimestamp(time.Now().Add(-time.Hour))}
		p.mu.Lock()
		if p.chain != nil {
			rec["certificate_chain"] = p.chain
		}
		p.mu.Unlock()
		body, _ := json.Marshal(rec)
		d := sha256.Sum256(body)
		key := p.priv
		if fault == "identity-signature" {
			_, key, _ = ed25519.GenerateKey(rand.Reader)
		}
		w.Header().Set("X-ARSIA-Sig", base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, d[:])))
		_, _ = w.Write(body)
	default:
		http.NotFound(w, r)
	}
}

// qualifiedProvider stands in for an eIDAS qualified trust service
// provider: a root the gateway lists as qualified (trust.qualified_ca_files),
// issuing leaves with the QcStatements extension. Custos's own CA never
// issues those.
type qualifiedProvider struct {
	key  ed25519.PrivateKey
	root *x509.Certificate
}

func newQualifiedProvider(dir string) (*qualifiedProvider, string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Conformance stand-in QTSP"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, "", err
	}
	root, _ := x509.ParseCertificate(der)
	path := filepath.Join(dir, "qtsp-root.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, "", err
	}
	return &qualifiedProvider{key: priv, root: root}, path, nil
}

// qcCompliance is a QcStatements value with one statement,
// id-etsi-qcs-QcCompliance (ETSI EN 319 412-5).
func qcCompliance() []byte {
	b, _ := asn1.Marshal([]struct{ ID asn1.ObjectIdentifier }{{asn1.ObjectIdentifier{0, 4, 0, 1862, 1, 1}}})
	return b
}

func (q *qualifiedProvider) issue(agent string, pub ed25519.PublicKey) ([]string, error) {
	u, err := url.Parse(agent)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: agent},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, URIs: []*url.URL{u},
		ExtraExtensions: []pkix.Extension{{Id: identity.OIDQCStatements, Value: qcCompliance()}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, q.root, pub, q.key)
	if err != nil {
		return nil, err
	}
	return []string{string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: q.root.Raw}))}, nil
}

// liveTarget is the running gateway and the agents the runner plays.
type liveTarget struct {
	ctx         context.Context
	base, admin string
	signer      sig.Signer
	priv        ed25519.PrivateKey
	kid         string
	l2, l3      *livePeer
	// newcomer is the agent the onboarding case onboards (liveAgent, on a
	// loopback port of its own).
	newcomer *livePeer
	qtsp     *qualifiedProvider
	http     *http.Client
	stop     func() error
	cleanup  []func()
	gdpr     map[string]any
	dir      string
}

// startLiveTarget starts a gateway with state, the certificate authority
// and the authorization server on, in a fresh data directory under dir.
func startLiveTarget(ctx context.Context, dir string) (*liveTarget, error) {
	return startLiveTargetWith(ctx, dir, "")
}

// startLiveTargetWith is startLiveTarget with tokens.mode set to
// tokensMode (off when empty).
func startLiveTargetWith(ctx context.Context, dir, tokensMode string) (*liveTarget, error) {
	return startLiveTargetOpts(ctx, dir, tokensMode, false)
}

// liveOnboardingPolicy is the capability policy of the onboarding case's
// gateway: demo.echo for anyone onboarded, demo.reviewed with a human
// approval per call.
const liveOnboardingPolicy = `{"policy_version": "conformance-1", "token_lifetime_seconds": 900, "capabilities": [
  {"capability": "demo.echo", "status": "allowed"},
  {"capability": "demo.reviewed", "status": "oversight_required"},
  {"capability": "demo.forbidden", "status": "prohibited"}]}`

// startLiveTargetOpts is startLiveTargetWith; with onboard, the gateway
// onboards agents (from loopback) and liveAgent is not configured: it is
// the agent to onboard.
func startLiveTargetOpts(ctx context.Context, dir, tokensMode string, onboard bool) (*liveTarget, error) {
	t := &liveTarget{ctx: ctx, dir: dir, http: &http.Client{Timeout: 30 * time.Second}, gdpr: map[string]any{"profile": "GDPR-STANDARD"}}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	t.priv, t.kid = priv, liveAgent+"#key-1"
	if t.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		return nil, err
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv.Public(), KeyID: t.kid, Algorithm: "EdDSA", Use: "sig"}}})
	jwksPath := filepath.Join(dir, "external-demo.jwks.json")
	if err := os.WriteFile(jwksPath, jwks, 0o600); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		dst   **livePeer
		agent string
	}{{&t.l2, liveL2}, {&t.l3, liveL3}} {
		peer, err := newLivePeer(p.agent)
		if err != nil {
			return nil, err
		}
		*p.dst = peer
		t.cleanup = append(t.cleanup, func() { _ = peer.srv.Close() })
	}
	qtsp, qtspRoot, err := newQualifiedProvider(dir)
	if err != nil {
		return nil, err
	}
	t.qtsp = qtsp
	cfg := config.Default()
	cfg.Listen, cfg.Data, cfg.Agent = "127.0.0.1:0", filepath.Join(dir, "data"), liveGateway
	cfg.Trust.JWKSFiles = []string{jwksPath}
	cfg.Trust.Peers = []config.TrustPeer{{Agent: liveL2, URL: t.l2.url}, {Agent: liveL3, URL: t.l3.url}}
	cfg.Trust.QualifiedCAFiles = []string{qtspRoot}
	cfg.Trust.MinTrustLevel.Capabilities = map[string]identity.TrustLevel{"demo.certified": identity.L2, "demo.qualified": identity.L3}
	cfg.Senders = []config.Sender{
		{Agent: liveAgent, Capabilities: []string{"arsiaprotocol.state.*", "arsiaprotocol.state.snapshot", "demo.echo"}},
		{Agent: liveL2, Capabilities: []string{"demo.*"}},
		{Agent: liveL3, Capabilities: []string{"demo.*"}},
	}
	cfg.Handlers = map[string]config.Handler{"demo.certified": {Type: "echo"}, "demo.qualified": {Type: "echo"}, "demo.echo": {Type: "echo"}}
	cfg.State.Enabled = true
	cfg.CertificateAuthority.Enabled = true
	cfg.AuthorizationServer.Enabled = true
	if tokensMode != "" {
		cfg.Tokens.Mode = tokensMode
	}
	if onboard {
		policy := filepath.Join(dir, "capability-policy.json")
		if err := os.WriteFile(policy, []byte(liveOnboardingPolicy), 0o600); err != nil {
			return nil, err
		}
		if t.newcomer, err = newLivePeer(liveAgent); err != nil {
			return nil, err
		}
		newcomer := t.newcomer
		t.cleanup = append(t.cleanup, func() { _ = newcomer.srv.Close() })
		cfg.Trust.JWKSFiles, cfg.Senders = nil, cfg.Senders[1:]
		cfg.Handlers["demo.reviewed"] = config.Handler{Type: "echo"}
		cfg.Onboarding = config.Onboarding{Enabled: true, PolicyFile: policy, DiscoveryURLs: []string{newcomer.url + "/"}}
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if t.base, t.admin, t.stop, err = startLocalGateway(ctx, cfg); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

// Close stops the gateway and the peers.
func (t *liveTarget) Close() {
	if t.stop != nil {
		_ = t.stop()
		t.stop = nil
	}
	for _, f := range t.cleanup {
		f()
	}
	t.cleanup = nil
}

// Run plays one case; cases of services this target lacks stay skipped.
func (t *liveTarget) Run(c conformance.LiveCase) error {
	op, _ := c.Input["operation"].(string)
	switch c.SkipUntil {
	case "state-storage":
		// Each on a gateway of its own, on an empty store, as the cases
		// assume (a snapshot before any write, totals of a fresh store).
		return t.fresh("", func(f *liveTarget) error { return f.state(op, c) })
	case "certificate-authority":
		return t.certificate(c)
	case "authorization-server":
		// On a gateway of its own that demands tokens (any kind).
		return t.fresh("any", func(f *liveTarget) error { return f.authorization(op, c) })
	case "multi-agent-flow":
		if op != "phase1_step_order" {
			break
		}
		return t.freshOnboarding(func(f *liveTarget) error { return f.onboarding(c) })
	}
	return fmt.Errorf("%w (%s is not served yet)", conformance.ErrLiveUnsupported, c.SkipUntil)
}

// fresh runs play against a gateway of its own (tokens.mode tokensMode),
// in a new directory under t's, stopped afterwards.
func (t *liveTarget) fresh(tokensMode string, play func(*liveTarget) error) error {
	dir, err := os.MkdirTemp(t.dir, "case-")
	if err != nil {
		return err
	}
	f, err := startLiveTargetWith(t.ctx, dir, tokensMode)
	if err != nil {
		return err
	}
	defer f.Close()
	return play(f)
}

// freshOnboarding runs play against a gateway of its own that onboards
// agents and demands tokens.
func (t *liveTarget) freshOnboarding(play func(*liveTarget) error) error {
	dir, err := os.MkdirTemp(t.dir, "case-")
	if err != nil {
		return err
	}
	f, err := startLiveTargetOpts(t.ctx, dir, "any", true)
	if err != nil {
		return err
	}
	defer f.Close()
	return play(f)
}

// send signs a request as signer/kid and posts it; it returns the status
// and the reply's payload, after checking the reply's signature.
func (t *liveTarget) send(signer sig.Signer, kid, capability, typ string, args any, comp map[string]any) (int, map[string]any, error) {
	return t.sendWith(signer, kid, capability, typ, args, comp, nil)
}

// sendWith is send with extra request headers.
func (t *liveTarget) sendWith(signer sig.Signer, kid, capability, typ string, args any, comp map[string]any, headers map[string]string) (int, map[string]any, error) {
	code, reply, err := t.post("/v1/arsia/inbox", signer, kid, []string{capability}, typ, args, comp, headers)
	p, _ := reply["payload"].(map[string]any)
	return code, p, err
}

// post signs a request of kid's agent to the gateway (capabilities caps)
// and posts it to path; it returns the status and the whole reply.
func (t *liveTarget) post(path string, signer sig.Signer, kid string, caps []string, typ string, args any, comp map[string]any, headers map[string]string) (int, map[string]any, error) {
	from, _, _ := strings.Cut(kid, "#")
	e, err := arsia.NewRequest(from, liveGateway, caps, typ, args, arsia.BuildOptions{Now: time.Now(), Compliance: comp})
	if err != nil {
		return 0, nil, err
	}
	env, err := e.Map()
	if err != nil {
		return 0, nil, err
	}
	signed, err := sig.Sign(env, signer, kid)
	if err != nil {
		return 0, nil, err
	}
	body, _ := json.Marshal(signed)
	req, _ := http.NewRequestWithContext(t.ctx, "POST", t.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", httpapi.ARSIAMediaType+"; v=1")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, nil, err
	}
	var reply map[string]any
	if err := json.Unmarshal(b, &reply); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("the reply is not JSON: %.200s", b)
	}
	return resp.StatusCode, reply, nil
}

func (t *liveTarget) stateOp(capability, op string, args map[string]any) (int, map[string]any, error) {
	return t.send(t.signer, t.kid, capability, "arsiaprotocol.state/"+op, args, t.gdpr)
}

func errorCode(p map[string]any) string {
	e, _ := p["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// set writes value under key (scope from the key) and fails unless the
// gateway accepted it.
func (t *liveTarget) set(key string, value any, expected int) (int, map[string]any, error) {
	parts := strings.Split(key, "/")
	if len(parts) < 3 {
		return 0, nil, fmt.Errorf("key %q has no scope", key)
	}
	args := map[string]any{"key": key, "value": value, "scope": parts[1], "pii_classification": "none"}
	if expected > 0 {
		args["expected_version"] = expected
	}
	return t.stateOp("arsiaprotocol.state.write", "set", args)
}

func (t *liveTarget) mustSet(key string, value any) error {
	code, p, err := t.set(key, value, 0)
	if err == nil && code != 200 {
		err = fmt.Errorf("SET %s: %d %v", key, code, p)
	}
	return err
}

func (t *liveTarget) state(op string, c conformance.LiveCase) error {
	key, _ := c.Input["key"].(string)
	switch op {
	case "set_then_get":
		want := map[string]any{"case": c.ID, "n": 1.0}
		if err := t.mustSet(key, want); err != nil {
			return err
		}
		code, p, err := t.stateOp("arsiaprotocol.state.read", "get", map[string]any{"key": key})
		if err != nil {
			return err
		}
		r, _ := p["result"].(map[string]any)
		if code != 200 || !reflect.DeepEqual(r["value"], want) {
			return fmt.Errorf("GET %s: %d %v, want the value set", key, code, p)
		}
		return expectValid(c, true)
	case "version_conflict":
		for i := range 2 {
			if err := t.mustSet(key, i); err != nil {
				return err
			}
		}
		code, p, err := t.set(key, "stale", 1)
		if err != nil {
			return err
		}
		if want, _ := c.Expected["error_code"].(string); errorCode(p) != want || code != 409 {
			return fmt.Errorf("stale SET: %d %s, want %s", code, errorCode(p), want)
		}
		return nil
	case "query":
		prefix, _ := c.Input["key_prefix"].(string)
		scope, _ := c.Input["scope"].(string)
		mine := []string{prefix + "q." + c.ID + ".a", prefix + "q." + c.ID + ".b"}
		for _, k := range append(mine, liveAgent+"/shared/q."+c.ID) {
			if err := t.mustSet(k, k); err != nil {
				return err
			}
		}
		code, p, err := t.stateOp("arsiaprotocol.state.read", "query", map[string]any{"key_prefix": prefix, "scope": scope})
		if err != nil {
			return err
		}
		r, _ := p["result"].(map[string]any)
		entries, _ := r["entries"].([]any)
		if code != 200 {
			return fmt.Errorf("QUERY: %d %v", code, p)
		}
		found := 0
		for _, e := range entries {
			m, _ := e.(map[string]any)
			k, _ := m["key"].(string)
			if !strings.HasPrefix(k, prefix) || m["scope"] != scope {
				return fmt.Errorf("QUERY returned %s (scope %v) outside key_prefix %s, scope %s", k, m["scope"], prefix, scope)
			}
			for _, w := range mine {
				if k == w {
					found++
				}
			}
		}
		if found != len(mine) {
			return fmt.Errorf("QUERY found %d of the %d keys set: %v", found, len(mine), p)
		}
		return expectValid(c, true)
	case "snapshot":
		asOf, _ := c.Input["as_of"].(string)
		key := liveAgent + "/agent/snap." + c.ID
		snap := func(at string) ([]any, error) {
			code, p, err := t.stateOp("arsiaprotocol.state.snapshot", "snapshot", map[string]any{"as_of": at, "filter": map[string]any{"key_prefix": key}})
			if err != nil {
				return nil, err
			}
			r, _ := p["result"].(map[string]any)
			entries, ok := r["entries"].([]any)
			if code != 200 || !ok {
				return nil, fmt.Errorf("SNAPSHOT as of %s: %d %v", at, code, p)
			}
			return entries, nil
		}
		// The case's instant, on the empty store: a valid, empty snapshot.
		if entries, err := snap(asOf); err != nil || len(entries) != 0 {
			return fmt.Errorf("SNAPSHOT as of %s: %v %v, want no entry", asOf, entries, err)
		}
		// And the point in time is honoured: between two SETs, the first.
		if err := t.mustSet(key, "before"); err != nil {
			return err
		}
		between := arsia.FormatTimestamp(time.Now())
		time.Sleep(5 * time.Millisecond)
		if err := t.mustSet(key, "after"); err != nil {
			return err
		}
		entries, err := snap(between)
		if err != nil {
			return err
		}
		if len(entries) != 1 || entries[0].(map[string]any)["value"] != "before" {
			return fmt.Errorf("SNAPSHOT between the two SETs: %v, want the first value", entries)
		}
		return expectValid(c, true)
	case "delete_missing":
		code, p, err := t.stateOp("arsiaprotocol.state.write", "delete", map[string]any{"key": key})
		if err != nil {
			return err
		}
		if code != 404 || errorCode(p) != "not_found" {
			return fmt.Errorf("DELETE of a missing key: %d %v, want 404 not_found", code, p)
		}
		code, p, err = t.stateOp("arsiaprotocol.state.read", "get", map[string]any{"key": key})
		if err != nil {
			return err
		}
		r, present := p["result"]
		if want, ok := c.Expected["result"]; code != 200 || !present || !ok || r != want {
			return fmt.Errorf("GET after DELETE: %d %v, want result %v", code, p, c.Expected["result"])
		}
		return nil
	}
	return fmt.Errorf("%w: state operation %q", conformance.ErrLiveUnsupported, op)
}

func expectValid(c conformance.LiveCase, got bool) error {
	if v, ok := c.Expected["valid"]; ok && v != got {
		return fmt.Errorf("valid = %v, want %v", got, v)
	}
	return nil
}

// caAPI calls the gateway's CA API as its administrator.
func (t *liveTarget) caAPI(body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(t.ctx, "POST", t.base+httpapi.CACertificatesPath, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.admin)
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m)
	return resp.StatusCode, m, nil
}

// level is the trust level the running gateway computes for peer p:
// the highest of the capabilities that need L3, L2 and L1 (none) it runs.
func (t *liveTarget) level(p *livePeer) (identity.TrustLevel, error) {
	for _, c := range []struct {
		capability string
		level      identity.TrustLevel
	}{{"demo.qualified", identity.L3}, {"demo.certified", identity.L2}} {
		code, pl, err := t.send(p.signer, p.kid, c.capability, "com.conformance/call", map[string]any{"case": "trust"}, nil)
		if err != nil {
			return identity.L1, err
		}
		switch {
		case code == 200:
			return c.level, nil
		case code == 403 && strings.Contains(fmt.Sprint(pl), "insufficient_trust_level"):
		default:
			return identity.L1, fmt.Errorf("%s as %s: %d %v", c.capability, p.agent, code, pl)
		}
	}
	return identity.L1, nil
}

// certificate: the level a peer gets from a chain issued live. L2 comes
// from the gateway's own CA; L3 needs a qualified provider, which the
// gateway's CA refuses to be (with the legal basis), so a stand-in
// qualified provider the gateway trusts issues it.
func (t *liveTarget) certificate(c conformance.LiveCase) error {
	want, _ := c.Expected["trust_level"].(string)
	var p *livePeer
	switch want {
	case "L2":
		p = t.l2
		code, cert, err := t.caAPI(map[string]any{"agent_id": p.agent, "public_key": p.jwk()})
		if err != nil {
			return err
		}
		if code != 201 {
			return fmt.Errorf("issuing L2: %d %v", code, cert)
		}
		var chain []string
		for _, s := range cert["certificate_chain"].([]any) {
			chain = append(chain, s.(string))
		}
		p.mu.Lock()
		p.chain = chain
		p.mu.Unlock()
	case "L3":
		p = t.l3
		code, m, err := t.caAPI(map[string]any{"agent_id": p.agent, "public_key": p.jwk(), "trust_level": "L3"})
		if err != nil {
			return err
		}
		if code != 403 || m["reason"] != httpapi.ReasonQualifiedNotIssued || m["legal_basis"] == nil {
			return fmt.Errorf("the gateway's CA asked for L3: %d %v, want 403 %s with its legal basis", code, m, httpapi.ReasonQualifiedNotIssued)
		}
		chain, err := t.qtsp.issue(p.agent, p.priv.Public().(ed25519.PublicKey))
		if err != nil {
			return err
		}
		p.mu.Lock()
		p.chain = chain
		p.mu.Unlock()
	default:
		return fmt.Errorf("%w: expected trust_level %q", conformance.ErrLiveUnsupported, want)
	}
	got, err := t.level(p)
	if err != nil {
		return err
	}
	if got.String() != want {
		return fmt.Errorf("trust level %s, want %s", got, want)
	}
	return nil
}

// form posts an OAuth form to the gateway's authorization server and
// decodes the JSON answer (nil for an empty body).
func (t *liveTarget) form(path string, v url.Values, headers map[string]string) (int, map[string]any, error) {
	req, _ := http.NewRequestWithContext(t.ctx, "POST", t.base+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, h := range headers {
		req.Header.Set(k, h)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s answered %d with a body that is not JSON: %.200s", path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, m, nil
}

// clientAuth is a fresh client assertion of the runner's agent, for the
// token endpoint.
func (t *liveTarget) clientAuth(v url.Values) (url.Values, error) {
	a, err := auth.NewClientAssertion(t.priv, t.kid, auth.ClientAssertionOptions{ClientID: liveAgent, Audience: t.base + "/oauth/token", Now: time.Now()})
	if err != nil {
		return nil, err
	}
	v.Set("client_assertion_type", auth.ClientAssertionType)
	v.Set("client_assertion", a)
	return v, nil
}

// token asks for an access token for demo.echo; with dpop, bound to the
// agent's key by a proof.
func (t *liveTarget) token(dpop bool) (int, map[string]any, error) {
	v, err := t.clientAuth(url.Values{"grant_type": {"client_credentials"}, "scope": {"demo.echo"}, "audience": {liveGateway}})
	if err != nil {
		return 0, nil, err
	}
	var h map[string]string
	if dpop {
		proof, err := auth.NewTokenRequestProof(t.priv, "POST", t.base+"/oauth/token", time.Now())
		if err != nil {
			return 0, nil, err
		}
		h = map[string]string{"DPoP": proof}
	}
	return t.form("/oauth/token", v, h)
}

// callWith calls demo.echo with an Authorization header ("" for none).
func (t *liveTarget) callWith(authorization string) (int, map[string]any, error) {
	var h map[string]string
	if authorization != "" {
		h = map[string]string{"Authorization": authorization}
	}
	return t.sendWith(t.signer, t.kid, "demo.echo", "com.conformance/call", map[string]any{"case": "token"}, nil, h)
}

func (t *liveTarget) introspect(token string) (map[string]any, error) {
	v, err := t.clientAuth(url.Values{"token": {token}})
	if err != nil {
		return nil, err
	}
	code, m, err := t.form("/oauth/introspect", v, nil)
	if err == nil && code != 200 {
		err = fmt.Errorf("introspection: %d %v", code, m)
	}
	return m, err
}

// authorization plays the authorization server cases: RFC 8414 metadata,
// the client_credentials grant with private_key_jwt (bearer and DPoP-bound
// tokens, used at the inbox), RFC 7662 introspection and RFC 7009
// revocation.
func (t *liveTarget) authorization(op string, c conformance.LiveCase) error {
	switch op {
	case "live_as_metadata":
		req, _ := http.NewRequestWithContext(t.ctx, "GET", t.base+"/.well-known/oauth-authorization-server", nil)
		resp, err := t.http.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var md map[string]any
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&md); err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("metadata: %d %v", resp.StatusCode, err)
		}
		// RFC 8414 §3.3: the issuer is the URL the metadata was derived from.
		if md["issuer"] != t.base {
			return fmt.Errorf("issuer %v, want %s", md["issuer"], t.base)
		}
		for k, want := range map[string]string{"token_endpoint": "/oauth/token", "introspection_endpoint": "/oauth/introspect",
			"revocation_endpoint": "/oauth/revoke", "jwks_uri": "/.well-known/arsia/jwks.json"} {
			if md[k] != t.base+want {
				return fmt.Errorf("%s = %v, want %s", k, md[k], t.base+want)
			}
		}
		for k, want := range map[string]string{"grant_types_supported": "client_credentials",
			"token_endpoint_auth_methods_supported": "private_key_jwt", "token_endpoint_auth_signing_alg_values_supported": "EdDSA",
			"dpop_signing_alg_values_supported": "EdDSA"} {
			if !strings.Contains(fmt.Sprint(md[k]), want) {
				return fmt.Errorf("%s = %v, want it to list %s", k, md[k], want)
			}
		}
		return expectValid(c, true)
	case "live_token_request":
		if code, p, err := t.callWith(""); err != nil || code != 401 {
			return fmt.Errorf("a call without a token: %d %v %v, want 401", code, p, err)
		}
		code, tok, err := t.token(false)
		if err != nil {
			return err
		}
		at, _ := tok["access_token"].(string)
		if code != 200 || at == "" || tok["token_type"] != "Bearer" || tok["expires_in"] == nil {
			return fmt.Errorf("token: %d %v", code, tok)
		}
		if code, p, err := t.callWith("Bearer " + at); err != nil || code != 200 {
			return fmt.Errorf("a call with the token: %d %v %v", code, p, err)
		}
		code, bound, err := t.token(true)
		if err != nil {
			return err
		}
		bt, _ := bound["access_token"].(string)
		if code != 200 || bound["token_type"] != "DPoP" || bt == "" {
			return fmt.Errorf("DPoP-bound token: %d %v", code, bound)
		}
		// A bound token without its proof is refused.
		if code, p, err := t.callWith("Bearer " + bt); err != nil || code != 401 {
			return fmt.Errorf("a bound token without its proof: %d %v %v, want 401", code, p, err)
		}
		return expectValid(c, true)
	case "live_token_introspection":
		code, tok, err := t.token(false)
		if err != nil {
			return err
		}
		at, _ := tok["access_token"].(string)
		if code != 200 || at == "" {
			return fmt.Errorf("token: %d %v", code, tok)
		}
		m, err := t.introspect(at)
		if err != nil {
			return err
		}
		if m["active"] != true || m["sub"] != liveAgent || !strings.Contains(fmt.Sprint(m["scope"]), "demo.echo") {
			return fmt.Errorf("introspection of a live token: %v", m)
		}
		if m, err := t.introspect("not-a-token"); err != nil || m["active"] != false {
			return fmt.Errorf("introspection of garbage: %v %v, want active false", m, err)
		}
		v, err := t.clientAuth(url.Values{"token": {at}})
		if err != nil {
			return err
		}
		if code, m, err := t.form("/oauth/revoke", v, nil); err != nil || code != 200 {
			return fmt.Errorf("revocation: %d %v %v", code, m, err)
		}
		if m, err := t.introspect(at); err != nil || m["active"] != false {
			return fmt.Errorf("introspection after revocation: %v %v, want active false", m, err)
		}
		code, p, err := t.callWith("Bearer " + at)
		if err != nil || code != 401 || !strings.Contains(fmt.Sprint(p), "token_revoked") {
			return fmt.Errorf("a call with the revoked token: %d %v %v, want 401 token_revoked", code, p, err)
		}
		return expectValid(c, true)
	case "issue_token":
		if agent, _ := c.Input["agent_id"].(string); agent != liveAgent {
			return fmt.Errorf("%w: issue_token for %q (the runner plays %s)", conformance.ErrLiveUnsupported, agent, liveAgent)
		}
		code, tok, err := t.token(true)
		if err != nil {
			return err
		}
		want, _ := c.Expected["status"].(int)
		if code != want || tok["access_token"] == nil {
			return fmt.Errorf("token: %d %v, want %d", code, tok, want)
		}
		return nil
	}
	return fmt.Errorf("%w: authorization operation %q", conformance.ErrLiveUnsupported, op)
}

// onboard asks the gateway to onboard p (its base URL, the capabilities
// requested) and returns the status and the decoded answer.
func (t *liveTarget) onboard(p *livePeer, requested ...string) (int, map[string]any, error) {
	return t.onboardAs(p, p.signer, requested...)
}

// onboardAs is onboard with the request signed by signer (under p's kid).
func (t *liveTarget) onboardAs(p *livePeer, signer sig.Signer, requested ...string) (int, map[string]any, error) {
	return t.post(onboard.Path, signer, p.kid, requested, onboarding.PayloadTypeRequest, map[string]any{"discovery_url": p.url}, t.gdpr, nil)
}

// taken returns the paths p was asked for since the last call.
func (p *livePeer) taken() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seen
	p.seen = nil
	return s
}

// onboarding plays ONBOARD-PHASE1-STEPS-ORDER: a new agent onboards
// itself over HTTP. The gateway must fetch its discovery document, then
// its identity record, then its JWKS (the agent sees the order), stop at
// the first step that fails (a peer whose discovery fails is never asked
// for its identity; one whose record's signature fails is denied at
// verify_identity_signature with the three fetch steps completed, in
// order), and, once the six steps and the later phases pass, answer the
// signed approval whose token the inbox accepts at once: no restart.
func (t *liveTarget) onboarding(c conformance.LiveCase) error {
	agent, _ := c.Input["agent_id"].(string)
	if agent != liveAgent {
		return fmt.Errorf("%w: onboarding agent %q", conformance.ErrLiveUnsupported, agent)
	}
	fetches := []string{"/.well-known/arsia", "/.well-known/arsia/identity", "/.well-known/arsia/jwks.json"}
	p := t.newcomer
	// A discovery that fails ends phase 1 at step 1.
	p.fault = "discovery"
	code, m, err := t.onboard(p, "demo.echo")
	if err != nil {
		return err
	}
	if seen := p.taken(); code != 403 || m["failed_step"] != "fetch_discovery" || m["denial_reason"] != "discovery_failed" || !reflect.DeepEqual(seen, fetches[:1]) {
		return fmt.Errorf("discovery failing: %d %v, fetched %v; want 403 discovery_failed after %v only", code, m, seen, fetches[:1])
	}
	// A record whose signature fails ends it at step 4, after 1 to 3 in order.
	p.fault = "identity-signature"
	if code, m, err = t.onboard(p, "demo.echo"); err != nil {
		return err
	}
	done := []any{"fetch_discovery", "fetch_identity_record", "fetch_jwks"}
	if seen := p.taken(); code != 403 || m["failed_step"] != "verify_identity_signature" || m["denial_reason"] != "identity_verification_failed" ||
		!reflect.DeepEqual(m["steps_completed"], done) || !reflect.DeepEqual(seen, fetches) {
		return fmt.Errorf("identity signature failing: %d %v, fetched %v; want 403 at verify_identity_signature after %v", code, m, seen, fetches)
	}
	// A request the agent's published keys do not verify: nobody's,
	// refused unsigned after the steps that fetched those keys.
	p.fault = ""
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	impostor, err := sig.NewEd25519Signer(other.Seed())
	if err != nil {
		return err
	}
	if code, m, err = t.onboardAs(p, impostor, "demo.echo"); err != nil {
		return err
	}
	if p.taken(); code != 401 || m["decision"] != nil {
		return fmt.Errorf("a request signed by another key: %d %v, want 401", code, m)
	}
	// All six steps pass: approved, signed by the gateway, with a token.
	code, m, err = t.onboard(p, "demo.echo", "demo.reviewed")
	if err != nil {
		return err
	}
	if seen := p.taken(); len(seen) < 3 || !reflect.DeepEqual(seen[:3], fetches) {
		return fmt.Errorf("the gateway fetched %v, want %v first, in order", seen, fetches)
	}
	if code != 200 {
		return fmt.Errorf("onboarding: %d %v, want 200 and the decision", code, m)
	}
	gw, err := t.gatewayKeys()
	if err != nil {
		return err
	}
	if _, err := sig.Verify(t.ctx, m, gw, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}}); err != nil {
		return fmt.Errorf("the decision's signature: %w", err)
	}
	payload, _ := m["payload"].(map[string]any)
	if err := onboarding.ValidateDecision(payload); err != nil {
		return err
	}
	result, _ := payload["result"].(map[string]any)
	token, _ := result["token"].(string)
	if m["intent"] != "approval_decision" || result["decision"] != "approved" || token == "" ||
		!reflect.DeepEqual(result["freely_allowed"], []any{"demo.echo"}) || !reflect.DeepEqual(result["oversight_required"], []any{"demo.reviewed"}) {
		return fmt.Errorf("decision %v, want approved: demo.echo freely, demo.reviewed with oversight, and a token", m)
	}
	// Operational at once: the token works at the inbox, and demo.reviewed
	// waits for a human.
	bearer := map[string]string{"Authorization": "Bearer " + token}
	code, rp, err := t.sendWith(p.signer, p.kid, "demo.echo", "com.conformance/call", map[string]any{"case": c.ID}, nil, bearer)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("the onboarded agent's demo.echo: %d %v, want 200", code, rp)
	}
	if code, rp, err = t.sendWith(p.signer, p.kid, "demo.reviewed", "com.conformance/call", map[string]any{"case": c.ID}, nil, bearer); err != nil {
		return err
	}
	if code != 202 {
		return fmt.Errorf("the onboarded agent's demo.reviewed: %d %v, want 202 pending approval", code, rp)
	}
	if want, _ := c.Expected["steps_in_order"].(bool); !want {
		return fmt.Errorf("the case expects steps_in_order %v", c.Expected["steps_in_order"])
	}
	return nil
}

// gatewayKeys are the gateway's published signing keys.
func (t *liveTarget) gatewayKeys() (sig.KeySource, error) {
	req, _ := http.NewRequestWithContext(t.ctx, "GET", t.base+"/.well-known/arsia/jwks.json", nil)
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return sig.ParseStaticJWKS(b)
}
