package authz_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/authz"
	"github.com/custos-runtime/custos/gateway/gatewaytest"
	"github.com/custos-runtime/custos/gateway/handler"
)

const (
	gatewayID = "agent:acme.gateway"
	agentID   = "agent:acme.advisor"
	agentKID  = agentID + "#key-1"
	issuerID  = "https://as.example.com"
	issuerKID = "as#key-1"
	inboxURL  = "https://gw.example.com/v1/arsia/inbox"
)

// counting is the echo handler, counting the calls that ran.
type counting struct {
	handler.Echo
	runs atomic.Int32
}

func (c *counting) Execute(ctx context.Context, call handler.Call) (handler.Result, error) {
	c.runs.Add(1)
	return c.Echo.Execute(ctx, call)
}

type rig struct {
	gw       *gateway.Gateway
	echo     *counting
	agent    sig.Signer
	dpopKey  ed25519.PrivateKey
	asKey    ed25519.PrivateKey
	agentJKT string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	newKey := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	gwKey, agentKey, asKey, dpopKey := newKey(), newKey(), newKey(), newKey()
	gwSigner, err := sig.NewEd25519Signer(gwKey.Seed())
	if err != nil {
		t.Fatal(err)
	}
	agentSigner, err := sig.NewEd25519Signer(agentKey.Seed())
	if err != nil {
		t.Fatal(err)
	}
	authority, xs, auditLog := gatewaytest.State(t)
	az, err := authz.New(authz.Config{
		Mode: authz.ModeAny,
		Issuers: []authz.Issuer{{Issuer: issuerID, Keys: auth.NewStaticKeys(jose.JSONWebKeySet{
			Keys: []jose.JSONWebKey{{Key: asKey.Public(), KeyID: issuerKID, Use: "sig"}}})}},
		MaxLifetime: 5 * time.Minute,
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	echo := &counting{}
	gw, err := gateway.New(gateway.Options{
		Agent: gatewayID, Signer: gwSigner, KID: gatewayID + "#gw-1",
		Keys:       sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: agentKey.Public(), KeyID: agentKID, Use: "sig"}}}),
		Grants:     map[string][]string{agentID: {"demo.*"}},
		Handlers:   map[string]handler.Handler{"demo.echo": echo},
		Authorizer: az,
		Authority:  authority, Exchanges: xs, Audit: auditLog,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	jkt, err := authz.KeyThumbprint(dpopKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	return &rig{gw: gw, echo: echo, agent: agentSigner, dpopKey: dpopKey, asKey: asKey, agentJKT: jkt}
}

// request is a new signed demo.echo request from the agent.
func (r *rig) request(t *testing.T) []byte {
	t.Helper()
	e, err := arsia.NewRequest(agentID, gatewayID, []string{"demo.echo"}, "com.acme/echo", map[string]any{"text": "hi"},
		arsia.BuildOptions{Now: time.Now(), Compliance: map[string]any{"profile": "GDPR-STANDARD"}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, r.agent, agentKID)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(signed)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func (r *rig) token(t *testing.T, jkt string) string {
	t.Helper()
	tok, err := authz.IssueToken(r.asKey, issuerKID, authz.TokenRequest{Issuer: issuerID, Subject: agentID,
		Audience: gatewayID, Scope: []string{"demo.echo"}, TTL: 5 * time.Minute, JKT: jkt})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (r *rig) send(t *testing.T, authorization, dpop string) gateway.Reply {
	t.Helper()
	return r.gw.Receive(t.Context(), gateway.Inbound{Body: r.request(t), Authorization: authorization, DPoP: dpop,
		Method: "POST", URL: inboxURL})
}

// refused checks a 401 with the reason, and that nothing ran.
func (r *rig) refused(t *testing.T, rep gateway.Reply, status int, reason string) {
	t.Helper()
	if rep.Status != status {
		t.Fatalf("status %d, want %d: %s", rep.Status, status, rep.Envelope)
	}
	if !strings.Contains(string(rep.Envelope), `"reason":"`+reason+`"`) {
		t.Fatalf("reply without reason %s: %s", reason, rep.Envelope)
	}
	if n := r.echo.runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
}

func TestGatewayWithTokens(t *testing.T) {
	r := newRig(t)

	// No token: 401, nothing runs.
	r.refused(t, r.send(t, "", ""), 401, authz.ReasonTokenMissing)
	// A bound token presented as bearer: 401.
	bound := r.token(t, r.agentJKT)
	r.refused(t, r.send(t, "Bearer "+bound, ""), 401, authz.ReasonDPoPRequired)

	// A DPoP-bound token with its proof: the call runs.
	proof, err := authz.NewProof(r.dpopKey, "POST", inboxURL, bound, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rep := r.send(t, "DPoP "+bound, proof)
	if rep.Status != 200 || r.echo.runs.Load() != 1 {
		t.Fatalf("status %d, runs %d: %s", rep.Status, r.echo.runs.Load(), rep.Envelope)
	}

	// The same proof with another request: a replay, 401, nothing more runs.
	rep = r.send(t, "DPoP "+bound, proof)
	if rep.Status != 401 || !strings.Contains(string(rep.Envelope), `"reason":"dpop_replay"`) {
		t.Fatalf("replayed proof: status %d: %s", rep.Status, rep.Envelope)
	}
	if n := r.echo.runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}

	// A fresh proof runs again; an unbound bearer token runs too (mode any).
	proof, err = authz.NewProof(r.dpopKey, "POST", inboxURL, bound, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.send(t, "DPoP "+bound, proof); rep.Status != 200 {
		t.Fatalf("fresh proof: status %d: %s", rep.Status, rep.Envelope)
	}
	if rep := r.send(t, "Bearer "+r.token(t, ""), ""); rep.Status != 200 {
		t.Fatalf("bearer: status %d: %s", rep.Status, rep.Envelope)
	}
	if n := r.echo.runs.Load(); n != 3 {
		t.Fatalf("the handler ran %d times, want 3", n)
	}
}

// A token whose scope lacks the call is forbidden; one for another
// gateway is unauthorized.
func TestGatewayTokenScopeAndAudience(t *testing.T) {
	r := newRig(t)
	tok, err := authz.IssueToken(r.asKey, issuerKID, authz.TokenRequest{Issuer: issuerID, Subject: agentID,
		Audience: gatewayID, Scope: []string{"demo.other"}})
	if err != nil {
		t.Fatal(err)
	}
	r.refused(t, r.send(t, "Bearer "+tok, ""), 403, authz.ReasonScopeInsufficient)
	tok, err = authz.IssueToken(r.asKey, issuerKID, authz.TokenRequest{Issuer: issuerID, Subject: agentID,
		Audience: "agent:acme.elsewhere", Scope: []string{"demo.echo"}})
	if err != nil {
		t.Fatal(err)
	}
	r.refused(t, r.send(t, "Bearer "+tok, ""), 401, authz.ReasonAudienceMismatch)
}
