package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway"
)

// createHistoryRequest records request id for capability, from agent,
// under MIFID-II when profile is set.
func createHistoryRequest(t *testing.T, e *authzEnv, id, capability, agent string, risk aais.RiskLevel) *aais.Request {
	t.Helper()
	now := time.Now().UTC()
	req, err := aais.NewRequest(aais.RequestParams{ID: id, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "test", SessionID: "s-" + id, AgentID: agent},
		Action: json.RawMessage(`{"kind":"tool.call","name":"` + capability + `","summary":"Call","arguments":{}}`),
		Risk:   aais.Risk{Level: risk, Reasons: []string{"test"}},
		Choices: []aais.Choice{{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"}},
		Extensions: aais.Extensions{ExchangeExtension: json.RawMessage(`{"profile":"GDPR-STANDARD"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.auth.Create(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return req
}

type historyAnswer struct {
	Resolved []HistoryEntry `json:"resolved"`
	Next     string         `json:"next_cursor"`
}

func (e *authzEnv) history(t *testing.T, who, query string) historyAnswer {
	t.Helper()
	code, out := e.call(t, "GET", "/approvals/history?"+query, "", who)
	if code != http.StatusOK {
		t.Fatalf("history?%s as %s: %d %s", query, who, code, out)
	}
	var ans historyAnswer
	if err := json.Unmarshal([]byte(out), &ans); err != nil {
		t.Fatal(err)
	}
	return ans
}

// historyIDs pages through query as who, limit at a time, and returns the
// request ids newest first.
func (e *authzEnv) historyIDs(t *testing.T, who, query string, limit int) []string {
	t.Helper()
	ids := []string{}
	cursor := ""
	for range 50 {
		q := query + "&limit=" + fmt.Sprint(limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		ans := e.history(t, who, q)
		if len(ans.Resolved) > limit {
			t.Fatalf("%d entries for limit %d", len(ans.Resolved), limit)
		}
		for _, h := range ans.Resolved {
			ids = append(ids, h.RequestID)
		}
		if ans.Next == "" {
			return ids
		}
		cursor = ans.Next
	}
	t.Fatal("history: no end after 50 pages")
	return nil
}

// fillHTTPHistory: writer decides the write_file requests, biller the
// billing ones; the newest is w3.
func fillHTTPHistory(t *testing.T) *authzEnv {
	e := newAuthzEnv(t)
	for i, c := range []struct{ id, capability, agent, who string }{
		{"w1", "write_file", "agent:a", "writer"},
		{"b1", "billing.refund", "agent:a", "biller"},
		{"w2", "write_file", "agent:b", "writer"},
		{"b2", "billing.refund", "agent:b", "biller"},
		{"w3", "write_file", "agent:a", "writer"},
	} {
		risk := []aais.RiskLevel{aais.RiskLow, aais.RiskHigh}[i%2]
		req := createHistoryRequest(t, e, "apr_"+c.id, c.capability, c.agent, risk)
		v := aais.Approve
		if i == 2 {
			v = aais.Deny
		}
		if code, out := e.call(t, "POST", "/approvals/"+req.ID+"/decisions", decisionJSON(t, req, v, nil), c.who); code != 200 {
			t.Fatalf("decide %s: %d %s", req.ID, code, out)
		}
	}
	// Still pending: in no history.
	createHistoryRequest(t, e, "apr_p1", "write_file", "agent:a", aais.RiskLow)
	return e
}

func TestHistorySearchFiltersAndPages(t *testing.T) {
	e := fillHTTPHistory(t)
	for _, c := range []struct {
		who, query string
		want       []string
	}{
		// Each reviewer sees what their roles cover.
		{"writer", "", []string{"apr_w3", "apr_w2", "apr_w1"}},
		{"biller", "", []string{"apr_b2", "apr_b1"}},
		{"nobody", "", []string{}},
		{"writer", "capability=billing.refund", []string{}},
		{"writer", "agent=agent%3Aa", []string{"apr_w3", "apr_w1"}},
		{"writer", "outcome=denied", []string{"apr_w2"}},
		{"writer", "reviewer=writer&outcome=approved", []string{"apr_w3", "apr_w1"}},
		{"writer", "risk=low", []string{"apr_w3", "apr_w2", "apr_w1"}},
		{"writer", "risk=high", []string{}},
		{"biller", "risk=high", []string{"apr_b2", "apr_b1"}},
		{"writer", "profile=GDPR-STANDARD", []string{"apr_w3", "apr_w2", "apr_w1"}},
		{"writer", "profile=MIFID-II", []string{}},
		{"biller", "since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00%2B02:00", []string{"apr_b2", "apr_b1"}},
		{"biller", "until=2000-01-01T00:00:00Z", []string{}},
	} {
		for _, limit := range []int{1, 2, 200} {
			if got := e.historyIDs(t, c.who, c.query, limit); !slices.Equal(got, c.want) {
				t.Errorf("%s ?%s (limit %d): %v, want %v", c.who, c.query, limit, got, c.want)
			}
		}
	}
	// The entry carries what the filters read.
	ans := e.history(t, "writer", "limit=1")
	if h := ans.Resolved[0]; h.Agent != "agent:a" || h.Risk != aais.RiskLow || h.ActionName != "write_file" ||
		h.Profile != "GDPR-STANDARD" || h.Actor == nil || h.Actor.ID != "writer" || ans.Next == "" {
		t.Errorf("entry %+v next %q", h, ans.Next)
	}
	// A cursor belongs to its filters.
	code, out := e.call(t, "GET", "/approvals/history?limit=1&outcome=approved&cursor="+url.QueryEscape(ans.Next), "", "writer")
	if code != 400 || !strings.Contains(out, "other filters") {
		t.Errorf("cursor with other filters: %d %s", code, out)
	}
}

func TestHistoryParametersAreStrict(t *testing.T) {
	e := fillHTTPHistory(t)
	good := e.history(t, "writer", "limit=1").Next
	for _, c := range []struct{ query, says string }{
		{"limit=0", "limit"},
		{"limit=201", "limit"},
		{"limit=01", "limit"},
		{"limit=-1", "limit"},
		{"limit=1.5", "limit"},
		{"limit=1&limit=2", "given 2 times"},
		{"agent=a&agent=b", "given 2 times"},
		{"agent=", "empty"},
		{"agnet=x", `unknown parameter \"agnet\"`},
		{"Agent=x", `unknown parameter \"Agent\"`},
		{"outcome=conflict", "outcome"},
		{"outcome=APPROVED", "outcome"},
		{"risk=extreme", "risk"},
		{"since=yesterday", "since"},
		{"since=2026-12-01T09:00:00", "since"},
		{"since=2026-12-01", "since"},
		{"until=2026-12-01t09:00:00z", "until"},
		{"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "before until"},
		{"since=2026-12-01T00:00:00Z&until=2026-12-01T00:00:00Z", "before until"},
		{"cursor=abc", "cursor"},
		{"cursor=h1.%21%21", "cursor"},
		{"cursor=h1." + "MA", "cursor"},
		{"cursor=" + url.QueryEscape(good) + "x", "cursor"},
		{"agent=%zz", "not well formed"},
		{"agent=a;b=c", "not well formed"},
		{"agent=" + strings.Repeat("a", 257), "longer than 256"},
		{"agent=a%00b", "printable"},
		{"agent=%ff", "printable"},
	} {
		code, out := e.call(t, "GET", "/approvals/history?"+c.query, "", "writer")
		if code != 400 || !strings.Contains(out, c.says) {
			t.Errorf("?%s: %d %s; want 400 saying %q", c.query, code, out, c.says)
			continue
		}
		p, err := asc.ParseProblem([]byte(out))
		if err != nil || p.AgentStatus == nil || p.AgentStatus.Code != asc.InvalidRequest {
			t.Errorf("?%s: not an INVALID_REQUEST problem: %s", c.query, out)
		}
	}
}

// The store searches the profile the gateway records; aais cannot import
// the gateway, so the two names must be kept equal by hand.
func TestHistoryProfileExtensionIsTheGateways(t *testing.T) {
	if aais.ExchangeProfileExtension != gateway.ExchangeExtension {
		t.Fatalf("aais.ExchangeProfileExtension %q, gateway.ExchangeExtension %q", aais.ExchangeProfileExtension, gateway.ExchangeExtension)
	}
}

func FuzzHistoryParams(f *testing.F) {
	for _, s := range []string{"", "limit=5", "agent=a&capability=b&reviewer=c&outcome=approved&profile=P&risk=low",
		"since=2026-12-01T09:00:00Z&until=2026-12-02T09:00:00%2B01:00", "cursor=h1.MTIuYWJj", "limit=1&limit=2", "%zz", "agent=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := parseHistoryParams(raw)
		if err != nil {
			if p.q.Limit != 0 || p.digest != "" {
				t.Fatalf("an error with a query: %+v", p)
			}
			return
		}
		if err := p.q.Check(); err != nil {
			t.Fatalf("accepted %q, but the store would refuse it: %v", raw, err)
		}
		// The cursor the answer would carry reads back to its sequence.
		if n, err := readCursor(makeCursor(7, p.digest), p.digest); err != nil || n != 7 {
			t.Fatalf("cursor round trip: %d %v", n, err)
		}
	})
}
