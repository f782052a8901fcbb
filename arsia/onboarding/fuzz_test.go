package onboarding

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParsePolicy checks that no document makes ParsePolicy panic, that
// what it accepts validates, round-trips, and evaluates consistently, and
// that everything it refuses is ErrInvalidPolicy.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"policy_version":"p","token_lifetime_seconds":3600,"capabilities":[{"capability":"notes.read","status":"allowed"},{"capability":"notes.write","status":"oversight_required","max_risk_level":4}]}`), "notes.read notes.write x.y")
	f.Add([]byte(`{"policy_version":"p","token_lifetime_seconds":1,"capabilities":[{"capability":"notes.read","status":"allowed"},{"capability":"notes.read","status":"prohibited"}]}`), "notes.read")
	f.Add([]byte(`{"policy_version":"p","token_lifetime_seconds":1.0,"capabilities":[{"capability":"arsiaprotocol.bogus","status":"allowed"}]}`), "arsiaprotocol.bogus")
	f.Add([]byte(`{"policy_version":"p","token_lifetime_seconds":99999999999999999999,"capabilities":[]}`), "")
	f.Add([]byte(`[1,2,{"a":null}]`), "a.*")
	f.Fuzz(func(t *testing.T, data []byte, requested string) {
		p, err := ParsePolicy(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("error does not wrap ErrInvalidPolicy: %v", err)
			}
			if p != nil {
				t.Fatal("policy returned with an error")
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted policy does not validate: %v", err)
		}
		again, err := p.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParsePolicy(again); err != nil {
			t.Fatalf("re-encoded policy refused: %v\n%s", err, again)
		}
		req := strings.Fields(requested)
		d := Evaluate(p, req, map[string]int{})
		granted := len(d.FreelyAllowed) + len(d.OversightRequired)
		if d.Approved != (granted > 0 && len(d.DenialReason) == 0) {
			t.Fatalf("inconsistent decision %+v", d)
		}
		for _, c := range d.FreelyAllowed {
			if r, ok := p.Rule(c); !ok || r.Status != StatusAllowed {
				t.Fatalf("%s granted freely without an allowed rule", c)
			}
		}
		for _, c := range d.OversightRequired {
			if r, ok := p.Rule(c); !ok || r.Status != StatusOversightRequired {
				t.Fatalf("%s granted with oversight without such a rule", c)
			}
		}
		if payload, err := BuildDecisionPayload(DecisionInput{AgentID: "agent:fuzz.client", Policy: p, Requested: req}); err != nil {
			t.Fatal(err)
		} else if payload.Approved() != d.Approved {
			t.Fatal("payload disagrees with evaluation")
		}
		_ = p.Warnings()
		_ = VerifyProvenance(requested, string(data), time.Unix(0, 0))
	})
}
