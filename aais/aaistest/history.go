package aaistest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// historyRow is what the history case made: request n's agent,
// capability, risk, profile, reviewer and outcome.
type historyRow struct {
	agent, capability, profile, reviewer string
	risk                                 aais.RiskLevel
	outcome                              aais.Outcome
	resolvedAt                           time.Time
}

// fillHistory creates and resolves 24 requests whose fields vary
// independently, resolved across three calendar days at times with and
// without fractions of a second, and returns them by request id.
func (f *fixture) fillHistory(t *testing.T) map[string]historyRow {
	t.Helper()
	agents := []string{"agent:a", "agent:b", "agent:c"}
	caps := []string{"billing.refund", "shell.exec"}
	risks := []aais.RiskLevel{aais.RiskLow, aais.RiskHigh, aais.RiskCritical, aais.RiskMedium}
	reviewers := []string{"alice", "bob"}
	rows := map[string]historyRow{}
	for i := range 24 {
		n := fmt.Sprintf("h%02d", i)
		row := historyRow{agent: agents[i%3], capability: caps[i%2], risk: risks[i%4], reviewer: reviewers[(i/2)%2]}
		origin := aais.Origin{Harness: "conformance", SessionID: "s-" + n, AgentID: row.agent}
		var ext aais.Extensions
		switch i % 3 {
		case 0:
			// The gateway's form: the profile in the exchange extension,
			// which wins over origin.profile.
			row.profile = "EU-AI-ACT-HIGH-RISK"
			ext = aais.Extensions{aais.ExchangeProfileExtension: json.RawMessage(`{"exchange_id":"exc_` + n + `","profile":"EU-AI-ACT-HIGH-RISK"}`)}
			origin.Profile = "GDPR-STANDARD"
		case 1:
			row.profile = "GDPR-STANDARD"
			origin.Profile = "GDPR-STANDARD"
		}
		// Every seventh request expires before anyone decides.
		ttl := 30 * 24 * time.Hour
		if i%7 == 6 {
			ttl = time.Hour
		}
		act := fmt.Sprintf(`{"kind":"tool.call","name":%q,"summary":"Call %s","arguments":{"n":%d}}`, row.capability, row.capability, i)
		r, err := aais.NewRequest(aais.RequestParams{
			ID: "apr_" + n, CreatedAt: f.clock.Now(), ExpiresAt: f.clock.Now().Add(ttl),
			Origin: origin, Action: json.RawMessage(act),
			Risk: aais.Risk{Level: row.risk, Reasons: []string{"test"}},
			Choices: []aais.Choice{
				{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
				{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
				{Decision: aais.Cancel, Scope: aais.ScopeOnce, Label: "Cancel"},
			},
			Extensions: ext,
		})
		if err != nil {
			t.Fatalf("NewRequest: %v", err)
		}
		if _, _, err := f.auth.Create(f.ctx, r); err != nil {
			t.Fatalf("Create: %v", err)
		}
		// Eight hours and a bit between resolutions: 24 of them span
		// three days, and some land on whole seconds.
		step := 8*time.Hour + time.Duration(i%2)*1500*time.Microsecond
		f.clock.Advance(step)
		verdict := []aais.Verdict{aais.Approve, aais.Deny, aais.Approve, aais.Cancel}[i%4]
		if i%7 == 6 {
			// Nobody decides: the request expires.
			m, err := f.auth.Expire(f.ctx, r.ID)
			if err != nil {
				t.Fatalf("Expire(%s): %v", r.ID, err)
			}
			row.reviewer, row.outcome, row.resolvedAt = "", m.Resolution.Outcome, m.Resolution.ResolvedAt.Time()
			rows[r.ID] = row
			continue
		}
		actor := aais.Actor{ID: row.reviewer, Type: aais.ActorHuman, AuthenticatedBy: "conformance"}
		d, err := aais.NewDecision(r, aais.DecisionParams{Decision: verdict, Scope: aais.ScopeOnce, Actor: actor, DecidedAt: f.clock.Now()})
		if err != nil {
			t.Fatalf("NewDecision: %v", err)
		}
		m, err := f.auth.DecideWith(f.ctx, d, aais.DecideOptions{Actor: actor})
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		row.outcome, row.resolvedAt = m.Resolution.Outcome, m.Resolution.ResolvedAt.Time()
		rows[r.ID] = row
	}
	// A pending request is in no history.
	f.create(t, "pending", reqOpt{ttl: -1})
	return rows
}

// searchAll pages through q with the given page size and returns the
// request ids in the order found, failing on a repeat or a disorder.
func searchAll(t *testing.T, f *fixture, q aais.HistoryQuery) []string {
	t.Helper()
	var (
		ids  []string
		last uint64
	)
	for range 100 {
		p, err := aais.SearchHistory(f.ctx, f.store, q)
		if err != nil {
			t.Fatalf("SearchHistory(%+v): %v", q, err)
		}
		if len(p.Entries) > q.Limit {
			t.Fatalf("SearchHistory: %d entries, limit %d", len(p.Entries), q.Limit)
		}
		for _, e := range p.Entries {
			if last != 0 && e.Sequence() >= last {
				t.Fatalf("SearchHistory: sequence %d after %d: not newest first", e.Sequence(), last)
			}
			last = e.Sequence()
			if e.Request.Event.Request.ID != e.Resolution.Event.Resolution.RequestID {
				t.Fatalf("entry pairs request %s with the resolution of %s", e.Request.Event.Request.ID, e.Resolution.Event.Resolution.RequestID)
			}
			ids = append(ids, e.Request.Event.Request.ID)
		}
		if p.Next == 0 {
			return ids
		}
		if q.Before != 0 && p.Next >= q.Before {
			t.Fatalf("SearchHistory: next cursor %d does not move below %d", p.Next, q.Before)
		}
		q.Before = p.Next
	}
	t.Fatal("SearchHistory: no end after 100 pages")
	return nil
}

func testHistorySearch(t *testing.T, f *fixture) {
	rows := f.fillHistory(t)
	day2 := Start.Add(24 * time.Hour)
	cases := []struct {
		name string
		q    aais.HistoryQuery
		keep func(historyRow) bool
	}{
		{"all", aais.HistoryQuery{}, func(historyRow) bool { return true }},
		{"agent", aais.HistoryQuery{Agent: "agent:b"}, func(r historyRow) bool { return r.agent == "agent:b" }},
		{"capability", aais.HistoryQuery{Capability: "billing.refund"}, func(r historyRow) bool { return r.capability == "billing.refund" }},
		{"reviewer", aais.HistoryQuery{Reviewer: "alice"}, func(r historyRow) bool { return r.reviewer == "alice" }},
		{"outcome", aais.HistoryQuery{Outcome: aais.OutcomeDenied}, func(r historyRow) bool { return r.outcome == aais.OutcomeDenied }},
		{"expired", aais.HistoryQuery{Outcome: aais.OutcomeExpired}, func(r historyRow) bool { return r.outcome == aais.OutcomeExpired }},
		{"exchange profile", aais.HistoryQuery{Profile: "EU-AI-ACT-HIGH-RISK"}, func(r historyRow) bool { return r.profile == "EU-AI-ACT-HIGH-RISK" }},
		{"origin profile", aais.HistoryQuery{Profile: "GDPR-STANDARD"}, func(r historyRow) bool { return r.profile == "GDPR-STANDARD" }},
		{"risk", aais.HistoryQuery{Risk: aais.RiskCritical}, func(r historyRow) bool { return r.risk == aais.RiskCritical }},
		{"since until", aais.HistoryQuery{Since: day2, Until: day2.Add(32 * time.Hour)},
			func(r historyRow) bool {
				return !r.resolvedAt.Before(day2) && r.resolvedAt.Before(day2.Add(32*time.Hour))
			}},
		{"since to the microsecond", aais.HistoryQuery{Since: Start.Add(16*time.Hour + 1500*time.Microsecond)},
			func(r historyRow) bool { return !r.resolvedAt.Before(Start.Add(16*time.Hour + 1500*time.Microsecond)) }},
		{"until excludes its instant", aais.HistoryQuery{Until: Start.Add(16*time.Hour + 1500*time.Microsecond)},
			func(r historyRow) bool { return r.resolvedAt.Before(Start.Add(16*time.Hour + 1500*time.Microsecond)) }},
		{"combined", aais.HistoryQuery{Agent: "agent:a", Outcome: aais.OutcomeApproved, Capability: "billing.refund"},
			func(r historyRow) bool {
				return r.agent == "agent:a" && r.outcome == aais.OutcomeApproved && r.capability == "billing.refund"
			}},
		{"nothing", aais.HistoryQuery{Agent: "agent:nobody"}, func(historyRow) bool { return false }},
		{"visible", aais.HistoryQuery{Visible: func(req *aais.Request, _ *aais.Resolution) bool { return req.Action.Name() == "shell.exec" }},
			func(r historyRow) bool { return r.capability == "shell.exec" }},
	}
	// Newest first is the order of creation reversed: each request was
	// resolved before the next was created.
	var order []string
	for id := range rows {
		order = append(order, id)
	}
	slices.Sort(order)
	slices.Reverse(order)
	for _, tc := range cases {
		want := []string{}
		for _, id := range order {
			if tc.keep(rows[id]) {
				want = append(want, id)
			}
		}
		if tc.name != "nothing" && len(want) == 0 {
			t.Fatalf("%s: the fixture has no match; the case would prove nothing", tc.name)
		}
		for _, limit := range []int{1, 3, aais.MaxHistoryLimit} {
			q := tc.q
			q.Limit = limit
			got := searchAll(t, f, q)
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, pages of %d:\n got %v\nwant %v", tc.name, limit, got, want)
			}
			ref, err := aais.ScanHistory(f.ctx, f.store, q)
			if err != nil {
				t.Fatalf("ScanHistory: %v", err)
			}
			page, err := aais.SearchHistory(f.ctx, f.store, q)
			if err != nil {
				t.Fatalf("SearchHistory: %v", err)
			}
			if len(ref.Entries) != len(page.Entries) || ref.Next != page.Next {
				t.Errorf("%s, limit %d: the store's page (%d entries, next %d) differs from the log scan's (%d, next %d)",
					tc.name, limit, len(page.Entries), page.Next, len(ref.Entries), ref.Next)
			}
			for i := range min(len(ref.Entries), len(page.Entries)) {
				if Wire(t, ref.Entries[i].Resolution.Event) != Wire(t, page.Entries[i].Resolution.Event) ||
					Wire(t, ref.Entries[i].Request.Event) != Wire(t, page.Entries[i].Request.Event) {
					t.Errorf("%s: entry %d differs from the log scan's", tc.name, i)
				}
			}
		}
	}
	for _, bad := range []aais.HistoryQuery{
		{Limit: 0}, {Limit: aais.MaxHistoryLimit + 1}, {Limit: 1, Outcome: aais.OutcomeConflict},
		{Limit: 1, Outcome: "maybe"}, {Limit: 1, Risk: "extreme"},
		{Limit: 1, Since: day2, Until: day2}, {Limit: 1, Before: aais.MaxSequence + 1},
	} {
		if _, err := aais.SearchHistory(f.ctx, f.store, bad); !errorsIsInvalid(err) {
			t.Errorf("SearchHistory(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func errorsIsInvalid(err error) bool { return errors.Is(err, aais.ErrInvalid) }
