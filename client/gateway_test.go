package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/client"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/store/memstore"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

// testGateway is a Custos gateway in this process, wired as custos serve
// wires one: the ARSIA inbox and the approvals API on one server, an
// echo handler for demo.echo and billing.invoice.create, and one trusted
// sender (agent:acme.advisor, the key Key returns) holding both.
type testGateway struct {
	URL   string
	Token string // the reviewer alice's API token
	Key   *client.Key
	// Keys is the gateway's own JWKS.
	Keys  jose.JSONWebKeySet
	close func()
}

const reviewerToken = "example-reviewer-token"

// startGateway starts a testGateway; Close stops it. Examples call it
// too, so it takes no testing.TB.
func startGateway() (*testGateway, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, err := os.MkdirTemp("", "custos-client-*")
	if err != nil {
		return nil, err
	}
	cleanup := []func(){func() { _ = os.RemoveAll(dir) }}
	fail := func(err error) (*testGateway, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cleanup = append(cleanup, cancel)

	// The sender's key and the gateway's.
	senderPub, senderPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fail(err)
	}
	senderSigner, err := sig.NewEd25519Signer(senderPriv.Seed())
	if err != nil {
		return fail(err)
	}
	key, err := client.NewKey(senderSigner, "agent:acme.advisor#key-1")
	if err != nil {
		return fail(err)
	}
	gwPub, gwPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fail(err)
	}
	gwSigner, err := sig.NewEd25519Signer(gwPriv.Seed())
	if err != nil {
		return fail(err)
	}
	const gwAgent, gwKID = "agent:acme.gateway", "agent:acme.gateway#key-1"

	st := memstore.New()
	auth, err := aais.NewAuthority(st, &aais.AuthorityOptions{Stream: "custos"})
	if err != nil {
		return fail(err)
	}
	xs, err := sqliteexchange.Open(ctx, filepath.Join(dir, "exchanges.db"), nil)
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { _ = xs.Close() })

	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	senders := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: senderPub, KeyID: key.KID, Algorithm: "EdDSA", Use: "sig"}}})
	gw, err := gateway.New(gateway.Options{Agent: gwAgent, Signer: gwSigner, KID: gwKID, Keys: senders,
		Grants:    map[string][]string{key.Agent: {"demo.*", "billing.*"}},
		Handlers:  map[string]handler.Handler{"demo.echo": handler.NewEcho(), "billing.invoice.create": handler.NewEcho()},
		Authority: auth, Exchanges: xs, Audit: audit.New(audit.NewMemory(), nil), Poll: 10 * time.Millisecond, Logger: quiet,
		StatusURL: func(id string) string { return base + "/v1/arsia/exchanges/" + id }})
	if err != nil {
		return fail(err)
	}
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: gwPub, KeyID: gwKID, Algorithm: "EdDSA", Use: "sig"}}}
	jwksJSON, err := json.Marshal(jwks)
	if err != nil {
		return fail(err)
	}
	md, err := arsia.NewAgentMetadata(arsia.AgentMetadata{AgentID: gwAgent, Name: "test gateway", Version: "1",
		Inbox: base + "/v1/arsia/inbox", JWKS: base + "/.well-known/arsia/jwks.json"})
	if err != nil {
		return fail(err)
	}
	mdJSON, err := json.Marshal(md)
	if err != nil {
		return fail(err)
	}
	inbox, err := httpapi.NewInbox(httpapi.InboxOptions{Gateway: gw, Metadata: mdJSON, JWKS: jwksJSON, PublicURL: base})
	if err != nil {
		return fail(err)
	}
	toks, err := httpapi.NewTokens(map[string]aais.Actor{httpapi.TokenHash(reviewerToken): {ID: "alice", Type: aais.ActorHuman}})
	if err != nil {
		return fail(err)
	}
	approvals, err := httpapi.NewApprovals(httpapi.ApprovalsOptions{Authority: auth, Store: st, Auth: toks,
		Poll: 10 * time.Millisecond, Heartbeat: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		return fail(err)
	}
	submit, err := httpapi.NewSubmit(httpapi.SubmitOptions{Authority: auth, Auth: toks, Logger: quiet})
	if err != nil {
		return fail(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/requests", submit)
	mux.Handle("/approvals/requests/", submit)
	mux.Handle("/approvals/", approvals)
	mux.Handle("/", inbox)
	srv.Config.Handler = mux
	srv.Start()
	cleanup = append(cleanup, srv.Close)
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	cleanup = append(cleanup, func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			panic(err)
		}
	})
	return &testGateway{URL: base, Token: reviewerToken, Key: key, Keys: jwks, close: func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}}, nil
}

func (g *testGateway) Close() { g.close() }
