package identity_test

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/identity"
)

func ExampleClassifyChain() {
	fmt.Println(identity.ClassifyChain(nil))
	fmt.Println(identity.ClassifyChain([]string{"not a pem"}))
	// Output:
	// L1
	// L1
}

func ExampleVerifyChain() {
	roots := x509.NewCertPool() // the CAs this receiver trusts for L2
	level, err := identity.VerifyChain([]string{"not a pem"}, identity.VerifyOptions{
		Roots:   roots,
		Now:     time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
		AgentID: "agent:acme.billing",
	})
	var ae *arsia.Error
	if errors.As(err, &ae) {
		fmt.Println(level, ae.Code, ae.Details["reason"])
	}
	// Output:
	// L1 certificate_invalid certificate chain is malformed
}

func ExamplePolicy_Check() {
	policy := identity.Policy{
		Default:      identity.L1,
		ByCapability: map[string]identity.TrustLevel{"payments.*": identity.L2},
		ByProfile:    map[string]identity.TrustLevel{"MIFID-II": identity.L3},
	}
	fmt.Println(policy.Required([]string{"payments.refund"}, ""))
	err := policy.Check(identity.L2, []string{"payments.refund"}, "MIFID-II")
	var ae *arsia.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code, ae.Details["required_trust_level"], ae.Details["actual_trust_level"])
	}
	// Output:
	// L2
	// forbidden L3 L2
}

func ExampleParseIdentityRecord() {
	rec, err := identity.ParseIdentityRecord([]byte(`{
		"agent_id": "agent:acme.billing",
		"owner_id": "PT501234567",
		"owner_name": "Acme Corp",
		"jurisdiction": "PT",
		"ai_system_classification": "minimal-risk",
		"created_at": "2026-03-24T10:00:00.000Z"
	}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.AgentID, rec.ClaimedTrustLevel())
	fmt.Println(identity.CheckLayers("agent:acme.billing", "agent:acme.billing#key-1", rec))
	// Output:
	// agent:acme.billing L1
	// <nil>
}
