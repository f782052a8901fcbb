package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// custos serve denies a request nobody decided by its escalation's
// deadline: the agent gets a denial whose signed decision carries the
// configured reason, and the audit log records the deadline.
func TestServeDeniesAtTheEscalationDeadline(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil,
		"notifications:\n  escalations:\n    - name: invoices\n      route: {capabilities: [\"billing.*\"]}\n"+
			"      deadline: 1s\n      at_deadline: deny\n      deny_reason: Nobody decided within a second.\n")
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "1.00"}, nil)
	if code != 202 {
		t.Fatalf("high-risk request: %d", code)
	}
	id := hdr.Get("Custos-Exchange")
	code, reply := g.awaitFinal(t, id)
	if code != 403 || !strings.Contains(marshalled(reply), "approval_denied") {
		t.Fatalf("after the deadline: %d %v", code, reply)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/v1/arsia/exchanges/"+id+"/decision", nil)
	c, d, _ := g.do(t, req)
	if c != 200 {
		t.Fatalf("decision: %d %v", c, d)
	}
	res := d["payload"].(map[string]any)["result"].(map[string]any)
	if res["decision"] != "denied" || !strings.Contains(res["reason"].(string), "Nobody decided within a second.") {
		t.Fatalf("decision result: %v", res)
	}
	g.stop()
	var out, errOut syncBuffer
	if code := run(t.Context(), []string{"audit", "export", "--log", filepath.Join(g.dataDir, "custos.db")}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("audit export: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"kind":"escalation"`) || !strings.Contains(out.String(), `"outcome":"deadline_denied"`) {
		t.Fatalf("no deadline record in the audit:\n%s", out.String())
	}
}

func marshalled(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
