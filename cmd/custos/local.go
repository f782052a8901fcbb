package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/config"
)

// Helpers for the commands that run a gateway and an agent in one process
// (demo, bench).

// localAgent makes an Ed25519 key for agent and writes its public JWKS to
// dir, for a gateway's trust.jwks_files.
func localAgent(dir, agent string) (signer sig.Signer, kid, jwksPath string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", "", err
	}
	kid = agent + "#key-1"
	if signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		return nil, "", "", err
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: kid, Algorithm: "EdDSA", Use: "sig"}}})
	if err != nil {
		return nil, "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", "", err
	}
	jwksPath = filepath.Join(dir, strings.NewReplacer(":", "-", ".", "-").Replace(agent)+".jwks.json")
	return signer, kid, jwksPath, os.WriteFile(jwksPath, jwks, 0o600)
}

// startLocalGateway opens the server cfg describes and runs it in the
// background until stop is called; it returns its base URL and reviewer
// token. stop returns Run's error.
func startLocalGateway(ctx context.Context, cfg config.Config) (base, token string, stop func() error, err error) {
	s, err := openServer(ctx, cfg, io.Discard, io.Discard)
	if err != nil {
		return "", "", nil, fmt.Errorf("the gateway did not start: %w", err)
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := s.Run(gctx)
		s.Close()
		done <- err
	}()
	stop = func() error {
		cancel()
		return <-done
	}
	return s.URL(), s.token, stop, nil
}
