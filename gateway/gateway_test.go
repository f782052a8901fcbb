package gateway

import (
	"encoding/json"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/gatewaytest"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

func newTestGateway(t *testing.T) (*Gateway, *sqliteexchange.Store, *audit.Log) {
	t.Helper()
	signer, _ := gatewaytest.Signer(t)
	a, xs, log := gatewaytest.State(t)
	g, err := New(Options{Agent: "agent:acme.gateway", Signer: signer, KID: "agent:acme.gateway#k",
		Keys: sig.NewStaticJWKS(jose.JSONWebKeySet{}), Authority: a, Exchanges: xs, Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	return g, xs, log
}

// An exchange a stopped gateway left running is ended as failed with an
// unknown result, recorded, and never claimed again.
func TestRecoverInterrupted(t *testing.T) {
	g, xs, log := newTestGateway(t)
	ctx := t.Context()
	x, _, err := xs.Create(ctx, exchange.Exchange{Sender: "agent:acme.advisor", MessageID: arsia.NewID(), Capability: "demo.echo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := xs.Claim(ctx, x.ID, exchange.Received); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	n, err := g.Recover(ctx, "")
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	got, err := xs.Get(ctx, x.ID)
	if err != nil || got.State != exchange.Failed || got.ReplyStatus != 500 {
		t.Fatalf("after Recover: %+v, %v", got, err)
	}
	var reply map[string]any
	if err := json.Unmarshal(got.Reply, &reply); err != nil || reply["intent"] != "error" {
		t.Fatalf("reply: %s", got.Reply)
	}
	if _, ok, _ := xs.Claim(ctx, x.ID, exchange.Received, exchange.Approved); ok {
		t.Fatal("an interrupted exchange was claimed again")
	}
	rep, err := log.Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != 1 {
		t.Fatalf("audit: %+v, %v", rep, err)
	}
	if n, err := g.Recover(ctx, ""); err != nil || n != 0 {
		t.Fatalf("second Recover = %d, %v", n, err)
	}
}

// Replicas sharing an exchange store end only their own predecessor's
// claims: another replica's exchange in executing may be running now.
func TestRecoverOnlyOwnInstance(t *testing.T) {
	g, xs, _ := newTestGateway(t)
	ctx := t.Context()
	x, _, err := xs.Create(ctx, exchange.Exchange{Sender: "agent:acme.advisor", MessageID: arsia.NewID(), Capability: "demo.echo",
		State: exchange.Executing})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := g.Recover(ctx, "replica-b"); err != nil || n != 0 {
		t.Fatalf("Recover(another instance) = %d, %v", n, err)
	}
	if got, _ := xs.Get(ctx, x.ID); got.State != exchange.Executing {
		t.Fatalf("another replica's claim was ended: %s", got.State)
	}
	if n, err := g.Recover(ctx, xs.Instance()); err != nil || n != 1 {
		t.Fatalf("Recover(own instance) = %d, %v", n, err)
	}
}
