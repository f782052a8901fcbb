package main

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/httpapi"
)

// reviewerSurfaces are the HTTP endpoints reviewers use.
type reviewerSurfaces struct {
	approvals http.Handler
}

func (r *reviewerSurfaces) mount(mux *http.ServeMux) {
	mux.Handle("/approvals/", r.approvals)
}

// newReviewerSurfaces builds the reviewer endpoints and returns the
// per-process admin token it printed for the first reviewer.
func newReviewerSurfaces(cfg config.Config, auth *aais.Authority, st aais.Store, logger *slog.Logger) (*reviewerSurfaces, string, error) {
	token, err := randomToken()
	if err != nil {
		return nil, "", err
	}
	reviewers := map[string]aais.Actor{httpapi.TokenHash(token): {ID: "admin", Type: aais.ActorHuman, DisplayName: "Gateway administrator"}}
	for _, r := range cfg.Reviewers {
		reviewers[r.TokenSHA256] = aais.Actor{ID: r.ID, Type: aais.ActorHuman, DisplayName: r.DisplayName}
	}
	tokens, err := httpapi.NewTokens(reviewers)
	if err != nil {
		return nil, "", err
	}
	approvals, err := httpapi.NewApprovals(httpapi.ApprovalsOptions{Authority: auth, Store: st, Auth: tokens, Logger: logger})
	if err != nil {
		return nil, "", err
	}
	return &reviewerSurfaces{approvals: approvals}, token, nil
}

func randomToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
