package trust_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().UTC().Truncate(time.Second)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// agentKey is an Ed25519 key of an agent, with its kid.
type agentKey struct {
	kid  string
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newAgentKey(t testing.TB, kid string) agentKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return agentKey{kid: kid, pub: pub, priv: priv}
}

func (k agentKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.pub, KeyID: k.kid, Algorithm: "EdDSA", Use: "sig"}
}

func (k agentKey) signer(t testing.TB) sig.Signer {
	t.Helper()
	s, err := sig.NewEd25519Signer(k.priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (k agentKey) thumbprint(t testing.TB) string {
	t.Helper()
	j := k.jwk()
	tp, err := j.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// fakePeer plays an ARSIA agent: discovery document, JWKS and identity
// record with its X-ARSIA-Sig header.
type fakePeer struct {
	t     testing.TB
	agent string
	srv   *httptest.Server

	mu             sync.Mutex
	metaAgent      string // agent_id in the metadata (agent when "")
	metaJWKS       string // jwks URL in the metadata (the local one when "")
	keys           []agentKey
	chain          []string // certificate_chain; nil: none
	recordAgent    string   // agent_id of the record (agent when "")
	noRecord       bool     // answer 404 for the identity record
	identityStatus int      // non-zero: answer this status for the identity record
	identityTo     string   // redirect the identity record there
	sigKey         *agentKey
	badSig         bool
	jwksStatus     int
	hits           map[string]int
}

func newFakePeer(t testing.TB, agent string, keys ...agentKey) *fakePeer {
	t.Helper()
	p := &fakePeer{t: t, agent: agent, keys: keys, hits: map[string]int{}}
	if len(keys) > 0 {
		k := keys[0]
		p.sigKey = &k
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakePeer) set(f func(p *fakePeer)) { p.mu.Lock(); f(p); p.mu.Unlock() }

func (p *fakePeer) count(path string) int { p.mu.Lock(); defer p.mu.Unlock(); return p.hits[path] }

func (p *fakePeer) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hits[r.URL.Path]++
	switch r.URL.Path {
	case "/.well-known/arsia":
		agent := p.agent
		if p.metaAgent != "" {
			agent = p.metaAgent
		}
		jwks := p.metaJWKS
		if jwks == "" {
			jwks = "/.well-known/arsia/jwks.json"
		}
		writeJSON(w, map[string]any{"agent_id": agent, "name": "peer", "version": "1.0", "protocol_version": "1.0",
			"inbox": p.srv.URL + "/v1/arsia/inbox", "jwks": jwks, "capabilities_supported": []string{"demo.echo"},
			"max_message_bytes": 1048576, "request_timeout_ms": 30000, "server_min": "1.0", "server_max": "1.0"}, nil)
	case "/.well-known/arsia/jwks.json":
		if p.jwksStatus != 0 {
			w.WriteHeader(p.jwksStatus)
			return
		}
		set := jose.JSONWebKeySet{}
		for _, k := range p.keys {
			set.Keys = append(set.Keys, k.jwk())
		}
		writeJSON(w, set, http.Header{"Cache-Control": {"max-age=3600"}})
	case "/.well-known/arsia/identity":
		if p.identityStatus != 0 {
			w.WriteHeader(p.identityStatus)
			return
		}
		if p.identityTo != "" {
			http.Redirect(w, r, p.identityTo, http.StatusFound)
			return
		}
		if p.noRecord {
			http.NotFound(w, r)
			return
		}
		agent := p.agent
		if p.recordAgent != "" {
			agent = p.recordAgent
		}
		rec := map[string]any{
			"agent_id": agent, "owner_id": "PT509876543", "owner_name": "Acme", "jurisdiction": "PT",
			"ai_system_classification": "limited-risk",
			"created_at":               time.Now().UTC().Add(-48 * time.Hour).Format("2006-01-02T15:04:05.000Z"),
			"contact_email":            "ops@acme.example",
		}
		if p.chain != nil {
			rec["certificate_chain"] = p.chain
		}
		body, err := json.Marshal(rec)
		if err != nil {
			p.t.Error(err)
			return
		}
		if p.sigKey != nil {
			d := sha256.Sum256(body)
			s := ed25519.Sign(p.sigKey.priv, d[:])
			if p.badSig {
				s[0] ^= 1
			}
			w.Header().Set("X-ARSIA-Sig", base64.RawURLEncoding.EncodeToString(s))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any, h http.Header) {
	for k, vs := range h {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// testPKI is a root CA, an intermediate and leaves issued for agents.
type testPKI struct {
	root, inter *x509.Certificate
	rootKey     crypto.Signer
	interKey    crypto.Signer
	interPEM    string
	rootFile    string
	serial      int64
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{}
	now := time.Now()
	p.root, p.rootKey, _ = p.ca(t, "Test Root", nil, nil, now.AddDate(5, 0, 0))
	p.inter, p.interKey, p.interPEM = p.ca(t, "Test Intermediate", p.root, p.rootKey, now.AddDate(4, 0, 0))
	p.rootFile = filepath.Join(t.TempDir(), "root.pem")
	if err := os.WriteFile(p.rootFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.root.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *testPKI) next() *big.Int { p.serial++; return big.NewInt(p.serial) }

func (p *testPKI) ca(t testing.TB, name string, parent *x509.Certificate, parentKey crypto.Signer, notAfter time.Time) (*x509.Certificate, crypto.Signer, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: p.next(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().AddDate(-1, 0, 0), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent, parentKey
	}
	cert, pemText := issue(t, tmpl, issuer, key.Public(), signer)
	return cert, key, pemText
}

// leafOpts vary a leaf from the valid default.
type leafOpts struct {
	agent    string
	notAfter time.Time
	qc       bool
}

// chain issues a leaf for pub and returns [leaf, intermediate] as PEM.
func (p *testPKI) chain(t testing.TB, pub crypto.PublicKey, o leafOpts) []string {
	t.Helper()
	if o.notAfter.IsZero() {
		o.notAfter = time.Now().AddDate(0, 3, 0)
	}
	scheme, opaque, _ := strings.Cut(o.agent, ":")
	tmpl := &x509.Certificate{
		SerialNumber: p.next(), Subject: pkix.Name{CommonName: o.agent},
		NotBefore: time.Now().AddDate(0, -6, 0), NotAfter: o.notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true,
		URIs: []*url.URL{{Scheme: scheme, Opaque: opaque}},
	}
	if o.qc {
		type statement struct{ ID asn1.ObjectIdentifier }
		v, err := asn1.Marshal([]statement{{ID: asn1.ObjectIdentifier{0, 4, 0, 1862, 1, 1}}})
		if err != nil {
			t.Fatal(err)
		}
		tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 3}, Value: v}}
	}
	_, leafPEM := issue(t, tmpl, p.inter, pub, p.interKey)
	return []string{leafPEM, p.interPEM}
}

func issue(t testing.TB, tmpl, issuer *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, string) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// signedRequest builds and signs a request from agent with key k.
func signedRequest(t testing.TB, from, to, capability, profile string, k agentKey) map[string]any {
	t.Helper()
	opts := arsia.BuildOptions{Now: time.Now()}
	if profile != "" {
		opts.Compliance = map[string]any{"profile": profile}
	}
	e, err := arsia.NewRequest(from, to, []string{capability}, "com.acme/call", map[string]any{"text": "hi"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, k.signer(t), k.kid)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}
