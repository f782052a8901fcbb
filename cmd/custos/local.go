package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
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

var (
	listeningRE = regexp.MustCompile(`listening on (http://\S+)`)
	tokenRE     = regexp.MustCompile(`Bearer ([0-9a-f]+)`)
)

// startLocalGateway runs serve(cfg) in the background until stop is called,
// and returns its base URL and reviewer token once it listens. stop returns
// serve's error.
func startLocalGateway(ctx context.Context, cfg config.Config) (base, token string, stop func() error, err error) {
	gctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(gctx, cfg, pw, io.Discard)
		pw.Close()
	}()
	var banner strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		banner.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "CLI: ") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	stop = func() error {
		cancel()
		return <-done
	}
	m, t := listeningRE.FindStringSubmatch(banner.String()), tokenRE.FindStringSubmatch(banner.String())
	if m == nil || t == nil {
		return "", "", nil, fmt.Errorf("the gateway did not start: %v\n%s", stop(), banner.String())
	}
	return m[1], t[1], stop, nil
}
