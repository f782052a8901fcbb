package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// custos serve resolves a request nobody decided at its escalation's
// deadline: denied, the agent gets a denial whose signed decision carries
// the configured reason; expired, the agent is told it expired (ASC 5004),
// not that anyone denied it. The audit log records the deadline.
func TestServeResolvesAtTheEscalationDeadline(t *testing.T) {
	for _, tc := range []struct {
		at, extra, reason, audit string
		asc                      float64
	}{
		{at: "deny", extra: "      deny_reason: Nobody decided within a second.\n", reason: "approval_denied",
			audit: "deadline_denied", asc: 4002},
		{at: "expire", reason: "approval_expired", audit: "deadline_expired", asc: 5004},
	} {
		t.Run(tc.at, func(t *testing.T) {
			g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil,
				"notifications:\n  escalations:\n    - name: invoices\n      route: {capabilities: [\"billing.*\"]}\n"+
					"      deadline: 1s\n      at_deadline: "+tc.at+"\n"+tc.extra)
			code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "1.00"}, nil)
			if code != 202 {
				t.Fatalf("high-risk request: %d", code)
			}
			id := hdr.Get("Custos-Exchange")
			code, reply := g.awaitFinal(t, id)
			perr, _ := reply["payload"].(map[string]any)["error"].(map[string]any)
			details, _ := perr["details"].(map[string]any)
			status, _ := details["agent_status"].(map[string]any)
			if code != 403 || details["reason"] != tc.reason || status["code"] != tc.asc {
				t.Fatalf("after the deadline: %d %s", code, marshalled(reply))
			}
			req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/v1/arsia/exchanges/"+id+"/decision", nil)
			c, d, _ := g.do(t, req)
			if c != 200 {
				t.Fatalf("decision: %d %v", c, d)
			}
			res := d["payload"].(map[string]any)["result"].(map[string]any)
			reason, _ := res["reason"].(string)
			if tc.at == "deny" && !strings.Contains(reason, "Nobody decided within a second.") ||
				tc.at == "expire" && !strings.HasPrefix(reason, "expired: ") {
				t.Fatalf("decision result: %v", res)
			}
			g.stop()
			var out, errOut syncBuffer
			if code := run(t.Context(), []string{"audit", "export", "--log", filepath.Join(g.dataDir, "custos.db")}, strings.NewReader(""), &out, &errOut); code != 0 {
				t.Fatalf("audit export: %d %s", code, errOut.String())
			}
			if !strings.Contains(out.String(), `"kind":"escalation"`) || !strings.Contains(out.String(), `"outcome":"`+tc.audit+`"`) {
				t.Fatalf("no deadline record in the audit:\n%s", out.String())
			}
		})
	}
}

func marshalled(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
