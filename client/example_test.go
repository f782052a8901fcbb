package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/client"
)

// Call another agent through Custos: sign, send, verify the reply.
func ExampleSender_Send() {
	g, err := startGateway() // a gateway in this process; in production its URL
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	// With a key file from custos keygen: key, err := client.LoadKey("key-1.private.jwk.json")
	s, err := client.NewSender(g.Key, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Send(context.Background(), client.Call{
		To:           g.URL,
		Capabilities: []string{"demo.echo"},
		Type:         "com.acme/echo",
		Args:         map[string]any{"text": "hello"},
	})
	if err != nil {
		log.Fatal(err) // a refusal is a *client.Error with its ASC status
	}
	fmt.Println(res.Intent, string(res.Result))
	// Output: response {"echo":{"text":"hello"}}
}

// A call a compliance profile puts before a human waits for the decision;
// a reviewer decides through the approvals API meanwhile.
func ExampleApprovals_Decide() {
	g, err := startGateway()
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()

	// The reviewer: approve the next pending request.
	reviewer, err := client.NewApprovals(g.URL, g.Token, nil)
	if err != nil {
		log.Fatal(err)
	}
	decided := make(chan error, 1)
	go func() {
		decided <- reviewer.Watch(ctx, client.WatchOptions{}, func(ev client.Event) error {
			var pending []aais.Request
			switch m := ev.Message; m.Type {
			case aais.TypeSnapshot:
				pending = m.Snapshot.Pending
			case aais.TypeRequested:
				pending = []aais.Request{*m.Request}
			}
			if len(pending) == 0 {
				return nil
			}
			if _, err := reviewer.Decide(ctx, &pending[0], client.Decision{Verdict: aais.Approve, Justification: "PO-2291 matches"}); err != nil {
				return err
			}
			return client.ErrStopWatch
		})
	}()

	// The agent: its call waits for the approval, then runs.
	s, err := client.NewSender(g.Key, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Send(ctx, client.Call{
		To:           g.URL,
		Capabilities: []string{"billing.invoice.create"},
		Type:         "com.acme/invoice",
		Args:         map[string]any{"amount": "100.00"},
		Profile:      "EU-AI-ACT-HIGH-RISK",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := <-decided; err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Intent, res.ApprovalID() != "", string(res.Result))
	// Output: response true {"echo":{"amount":"100.00"}}
}
