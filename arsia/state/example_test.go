package state_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/state"
)

func ExampleParseKey() {
	k, err := state.ParseKey("agent:acme.billing/agent/mifid/client-profile/PT501234567")
	fmt.Println(k.Owner, k.Scope, k.Name, err)

	_, err = state.ParseKey("agent:acme.billing/agent/arsiaprotocol.grants/1")
	fmt.Println(errors.Is(err, state.ErrReservedKey))
	// Output:
	// agent:acme.billing agent mifid/client-profile/PT501234567 <nil>
	// true
}

func ExampleRequiredCapability() {
	for _, op := range []state.Operation{state.OpGet, state.OpSet, state.OpPurge} {
		c, _ := state.RequiredCapability(op)
		fmt.Println(op, c, state.Covers("arsiaprotocol.state.*", c))
	}
	// Output:
	// GET arsiaprotocol.state.read true
	// SET arsiaprotocol.state.write true
	// PURGE arsiaprotocol.state.purge false
}

func ExampleEffectiveRetention() {
	short := 30
	days, _ := state.EffectiveRetention(nil, "MIFID-II", &short)
	fmt.Println(*days)
	none, _ := state.EffectiveRetention(nil, "GDPR-STANDARD", nil)
	fmt.Println(none == nil)
	// Output:
	// 1827
	// true
}

func ExampleValidateEntry() {
	entry := map[string]any{
		"key": "agent:acme.alpha/agent/user.profile", "value": map[string]any{"name": "Jane"},
		"owner_agent_id": "agent:acme.alpha", "scope": "agent",
		"created_at": "2026-04-13T12:00:00.000Z", "updated_at": "2026-04-13T12:00:00.000Z",
		"pii_classification": "personal", "version": 1, "data_residency": "PT",
	}
	err := state.ValidateEntry(entry, state.EntryContext{
		Sender:     "agent:acme.alpha",
		Compliance: map[string]any{"profile": "GDPR-STANDARD", "data_residency": "PT"},
	})
	fmt.Println(errors.Is(err, state.ErrMissingLegalBasis))
	// Output: true
}

func ExampleMemoryStore() {
	ctx := context.Background()
	store := state.NewMemoryStore(nil)
	now := time.Date(2026, 4, 13, 12, 0, 0, 0, time.UTC)
	owner := "agent:acme.alpha"
	args := state.SetArgs{Key: owner + "/agent/counter", Value: 1, Scope: state.ScopeAgent, PIIClassification: state.PIINone}

	e, _ := store.Set(ctx, owner, args, nil, now)
	fmt.Println("version", e.Version)

	args.Value, args.ExpectedVersion = 2, 5 // stale: the entry is at version 1
	_, err := store.Set(ctx, owner, args, nil, now)
	var ae *arsia.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code, ae.Details["current_version"], ae.Details["expected_version"])
	}

	_, _ = store.Delete(ctx, owner, state.DeleteArgs{Key: args.Key}, now.Add(time.Minute))
	got, _ := store.Get(ctx, owner, state.GetArgs{Key: args.Key}, now.Add(time.Minute))
	fmt.Println(got == nil)
	// Output:
	// version 1
	// conflict 1 5
	// true
}

func ExampleNewAuditRecord() {
	env := map[string]any{
		"v": "1.0", "id": "22222222-2222-4222-9222-222222222222", "ts": "2026-04-13T12:00:00.000Z",
		"from": "agent:acme.alpha", "to": "agent:acme.store", "intent": "request",
		"compliance": map[string]any{"profile": "GDPR-STANDARD", "legal_basis": "legal_obligation"},
		"payload": map[string]any{"type": "arsiaprotocol.state/purge",
			"args": map[string]any{"key": "agent:acme.alpha/agent/personal-data", "reason": "GDPR Art. 17 erasure request"}},
	}
	rec, err := state.NewAuditRecord(env, nil, state.AuditInput{
		RecordID: "00000000-0000-4000-8000-000000000001", EventType: "state_purge", OperatorID: "LEI:529900T8BM49AURSDO55",
		ProcessedAt: time.Date(2026, 4, 13, 12, 0, 1, 0, time.UTC), RetentionDays: 90,
		PIIClassification: state.PIIPersonal,
	})
	fmt.Println(err)
	fmt.Println(rec.EventType, rec.Key, rec.InitiatorAgentID, rec.PurgedAt, rec.RetainedUntil)
	// Output:
	// <nil>
	// state_purge agent:acme.alpha/agent/personal-data agent:acme.alpha 2026-04-13T12:00:01.000Z 2026-07-12T12:00:01.000Z
}
