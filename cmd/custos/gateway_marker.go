package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/store"
)

// gatewayMarker is what custos serve records about the approval store it
// uses: custos approvals reads it and refuses to change anything in the
// store when ReviewerPolicy is set, since its decisions would be the OS
// user's, outside the roles, separation of duties and justifications the
// gateway enforces (approvals.go). It lives next to a file-backed store
// (SQLite, filestore: store.ServeMarkerPath) and, in a PostgreSQL store,
// in the table store.ServeMarkerTable of the store's schema. It is a
// guard against deciding around the policy by mistake, not a boundary:
// whoever can write the store can write anything into it.
type gatewayMarker struct {
	Agent     string `json:"agent"`
	Data      string `json:"data"`
	PublicURL string `json:"public_url"`
	// ReviewerPolicy says the configuration has reviewers, roles,
	// separation_of_duties or justification_required.
	ReviewerPolicy bool `json:"reviewer_policy"`
}

// hasReviewerPolicy says whether cfg restricts who may decide what.
func hasReviewerPolicy(cfg config.Config) bool {
	return len(cfg.Reviewers) > 0 || len(cfg.Roles) > 0 || len(cfg.SeparationOfDuties) > 0 || len(cfg.JustificationRequired) > 0
}

// writeGatewayMarker records (replaces) the marker of cfg's store, at
// every start, so that it follows the configuration. The store must be
// open already: there is no marker for a store file that does not exist.
// When it cannot be written and cfg has a reviewer policy, the gateway
// does not start: custos approvals would decide around that policy.
func writeGatewayMarker(ctx context.Context, cfg config.Config) error {
	loc, err := store.Parse(cfg.Store)
	if err != nil {
		return err
	}
	m := gatewayMarker{Agent: cfg.Agent, Data: cfg.Data, PublicURL: cfg.PublicURL, ReviewerPolicy: hasReviewerPolicy(cfg)}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	err = store.WriteServeMarker(ctx, loc, b)
	if err != nil && m.ReviewerPolicy {
		return fmt.Errorf("recording that custos approvals may not decide on this store: %w", err)
	}
	return nil
}

// readGatewayMarker reads the marker of the store at loc; ok is false when
// there is none. A marker that cannot be read is an error: the caller
// fails closed.
func readGatewayMarker(ctx context.Context, loc store.Location) (m gatewayMarker, ok bool, err error) {
	b, ok, err := store.ReadServeMarker(ctx, loc)
	if err == nil && ok {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return m, true, fmt.Errorf("the store's custos serve marker cannot be read: %w", err)
	}
	return m, ok, nil
}
