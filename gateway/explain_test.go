package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/handler"
)

// explaining is a handler whose results come with the explanation exp.
type explaining struct {
	handler.Handler
	exp string
}

func (e explaining) Execute(ctx context.Context, c handler.Call) (handler.Result, error) {
	res, err := e.Handler.Execute(ctx, c)
	if e.exp != "" {
		res.Explanation = json.RawMessage(e.exp)
	}
	return res, err
}

// Under a profile that requires explanations (ARSIA-Actions §5.2), every
// response carries one: the handler's when it gives a valid one, else the
// gateway's own account of why the call ran, which says it is not the
// model's. Under a profile that requires none, a handler's explanation
// still goes through, and the gateway adds none of its own.
func TestResponsesCarryTheExplanationTheProfileRequires(t *testing.T) {
	const valid = `{"reasoning":"Looked the invoice up and confirmed the amount.","confidence":0.82,"inputs_used":["args:text"]}`
	cases := []struct {
		name, profile, exp string
		approve            bool
		want               string // who explains: "handler", "gateway" or "" (no explanation)
	}{
		{"limited risk, no explanation from the handler", "EU-AI-ACT-LIMITED-RISK", "", false, "gateway"},
		{"limited risk, the handler explains", "EU-AI-ACT-LIMITED-RISK", valid, false, "handler"},
		{"limited risk, an invalid explanation", "EU-AI-ACT-LIMITED-RISK", `{"reasoning":"","confidence":2,"inputs_used":[]}`, false, "gateway"},
		{"DSA-VLOP, no explanation from the handler", "DSA-VLOP", "", false, "gateway"},
		{"GDPR, none required", "GDPR-STANDARD", "", false, ""},
		{"GDPR, the handler explains anyway", "GDPR-STANDARD", valid, false, "handler"},
		{"high risk, approved", "EU-AI-ACT-HIGH-RISK", "", true, "gateway"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newPipeRig(t, func(o *Options, r *pipeRig) {
				o.Handlers["demo.echo"] = explaining{Handler: r.echo, exp: c.exp}
			})
			q := req{compliance: profile(c.profile)}
			body, id := r.build(t, q)
			var reply []byte
			if c.approve {
				rep := r.g.Receive(t.Context(), Inbound{Body: body})
				if rep.Status != 202 {
					t.Fatalf("want pending: %d", rep.Status)
				}
				r.decide(t, rep.ExchangeID, aais.Approve, "")
				step(t, r.g.resume)
				reply = r.state(t, id).Reply
			} else {
				rep := r.g.Receive(t.Context(), Inbound{Body: body})
				if rep.Status != 200 {
					t.Fatalf("status %d: %s %v", rep.Status, rep.Envelope, rep.Problem)
				}
				reply = rep.Envelope
			}
			resp := r.verified(t, reply)
			var request map[string]any
			if err := json.Unmarshal(body, &request); err != nil {
				t.Fatal(err)
			}
			if v := compliance.ValidateExplainability(request, resp, nil); v != nil {
				t.Fatalf("the response breaks explainability_required: %+v\n%s", v, reply)
			}
			exp, has := get(resp, "payload").(map[string]any)["explanation"].(map[string]any)
			recs := r.recordsOf(t, audit.KindExecution, id)
			if len(recs) != 1 {
				t.Fatalf("%d execution records", len(recs))
			}
			if got, _ := recs[0].Details["explanation"].(string); got != c.want || has != (c.want != "") {
				t.Fatalf("explained by %q (in the response: %v), want %q", got, has, c.want)
			}
			switch c.want {
			case "handler":
				var want map[string]any
				_ = json.Unmarshal([]byte(valid), &want)
				if exp["reasoning"] != want["reasoning"] || exp["confidence"] != want["confidence"] {
					t.Fatalf("the handler's explanation changed: %v", exp)
				}
			case "gateway":
				reasoning, _ := exp["reasoning"].(string)
				if !strings.Contains(reasoning, "not the model's") {
					t.Fatalf("the gateway's explanation does not say whose it is: %q", reasoning)
				}
				if c.exp != "" && !strings.Contains(reasoning, "not a valid ARSIA explanation") {
					t.Fatalf("the gateway's explanation does not say the handler's was invalid: %q", reasoning)
				}
				var inputs []string
				for _, v := range exp["inputs_used"].([]any) {
					inputs = append(inputs, v.(string))
				}
				if !slices.Contains(inputs, "message:"+id) {
					t.Fatalf("inputs_used %v do not name the request", inputs)
				}
				approved := slices.ContainsFunc(inputs, func(s string) bool { return strings.HasPrefix(s, "approval:apr_") })
				if approved != c.approve {
					t.Fatalf("inputs_used %v: approval named %v, want %v", inputs, approved, c.approve)
				}
			}
		})
	}
}
