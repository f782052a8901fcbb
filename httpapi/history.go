package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// The history search, GET /approvals/history: resolutions newest first,
// filtered, in pages joined by an opaque cursor.

// historyFilters are the filter parameters of GET /approvals/history, in
// the order the cursor's digest reads them.
var historyFilters = []string{"agent", "capability", "reviewer", "outcome", "profile", "risk", "since", "until"}

// maxHistoryParam caps the length of a filter value, in bytes.
const maxHistoryParam = 256

// defaultHistoryLimit is the page size when limit is not given.
const defaultHistoryLimit = 50

// historyParams is a parsed GET /approvals/history query.
type historyParams struct {
	q aais.HistoryQuery
	// digest identifies the filters, so that a cursor is only accepted
	// with the search it came from.
	digest string
}

// parseHistoryParams reads the query string of GET /approvals/history.
// Every parameter is known, given at most once, and valid; the error
// names the parameter and what it wants.
func parseHistoryParams(rawQuery string) (historyParams, error) {
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return historyParams{}, fmt.Errorf("the query string is not well formed: %v", err)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(historyFilters, k) && k != "limit" && k != "cursor" {
			return historyParams{}, fmt.Errorf("unknown parameter %q: want %s, limit or cursor", printable(k), strings.Join(historyFilters, ", "))
		}
		if len(vals[k]) != 1 {
			return historyParams{}, fmt.Errorf("%s: given %d times, want once", k, len(vals[k]))
		}
		v := vals[k][0]
		if v == "" {
			return historyParams{}, fmt.Errorf("%s: empty; leave it out to not filter", k)
		}
		if len(v) > maxHistoryParam {
			return historyParams{}, fmt.Errorf("%s: longer than %d bytes", k, maxHistoryParam)
		}
		if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return historyParams{}, fmt.Errorf("%s: not printable UTF-8 text", k)
		}
	}
	get := func(k string) string {
		if v := vals[k]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	p := historyParams{q: aais.HistoryQuery{Limit: defaultHistoryLimit,
		Agent: get("agent"), Capability: get("capability"), Reviewer: get("reviewer"), Profile: get("profile")}}
	if v := get("outcome"); v != "" {
		o := aais.Outcome(v)
		if !o.Valid() || o == aais.OutcomeConflict {
			return historyParams{}, fmt.Errorf("outcome: %q is not one of approved, denied, cancelled, expired, stale, invalid", v)
		}
		p.q.Outcome = o
	}
	if v := get("risk"); v != "" {
		switch r := aais.RiskLevel(v); r {
		case aais.RiskLow, aais.RiskMedium, aais.RiskHigh, aais.RiskCritical:
			p.q.Risk = r
		default:
			return historyParams{}, fmt.Errorf("risk: %q is not one of low, medium, high, critical", v)
		}
	}
	for _, b := range []struct {
		name string
		to   *time.Time
	}{{"since", &p.q.Since}, {"until", &p.q.Until}} {
		v := get(b.name)
		if v == "" {
			continue
		}
		ts, err := aais.ParseTimestamp(v)
		if err != nil {
			return historyParams{}, fmt.Errorf("%s: %q is not an RFC 3339 date-time with an offset (2026-12-01T09:00:00Z)", b.name, v)
		}
		*b.to = ts.Time()
	}
	if !p.q.Since.IsZero() && !p.q.Until.IsZero() && !p.q.Since.Before(p.q.Until) {
		return historyParams{}, fmt.Errorf("since: must be before until")
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > aais.MaxHistoryLimit || strconv.Itoa(n) != v {
			return historyParams{}, fmt.Errorf("limit: want a whole number from 1 to %d", aais.MaxHistoryLimit)
		}
		p.q.Limit = n
	}
	h := sha256.New()
	for _, k := range historyFilters {
		fmt.Fprintf(h, "%s=%q\n", k, get(k))
	}
	p.digest = hex.EncodeToString(h.Sum(nil)[:8])
	if v := get("cursor"); v != "" {
		before, err := readCursor(v, p.digest)
		if err != nil {
			return historyParams{}, err
		}
		p.q.Before = before
	}
	return p, nil
}

// printable quotes a parameter name for an error message, cut short.
func printable(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// The cursor is "h1." and the unpadded base64url of "<sequence>.<filters
// digest>": opaque to clients, bound to the filters it was made with.
const cursorPrefix = "h1."

func makeCursor(before uint64, digest string) string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatUint(before, 10)+"."+digest))
}

func readCursor(v, digest string) (uint64, error) {
	raw, ok := strings.CutPrefix(v, cursorPrefix)
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if !ok || err != nil {
		return 0, fmt.Errorf("cursor: not a cursor this server gave out; start again without it")
	}
	seq, dig, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil || n < 1 || n > aais.MaxSequence || strconv.FormatUint(n, 10) != seq {
		return 0, fmt.Errorf("cursor: not a cursor this server gave out; start again without it")
	}
	if dig != digest {
		return 0, fmt.Errorf("cursor: made for a search with other filters; send the filters it came with, or start again without it")
	}
	return n, nil
}

// history answers GET /approvals/history: the resolutions the caller may
// see (Policy.mayView) that match the filters, newest first, limit at a
// time (50 by default, at most 200), and next_cursor when there may be
// more.
func (a *approvals) history(w http.ResponseWriter, r *http.Request) {
	p, err := parseHistoryParams(r.URL.RawQuery)
	if err != nil {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "GET /approvals/history: "+err.Error()+".")
		return
	}
	ctx := r.Context()
	actor := a.actor(r)
	p.q.Visible = func(req *aais.Request, res *aais.Resolution) bool { return a.o.Policy.mayView(actor, req, res) }
	head, err := a.o.Store.EventsAfter(ctx, aais.MaxSequence, 1)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := aais.SearchHistory(ctx, a.o.Store, p.q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	entries := make([]HistoryEntry, 0, len(page.Entries))
	for _, found := range page.Entries {
		entries = append(entries, historyEntry(found.Request.Event.Request, found.Resolution.Event))
	}
	ans := struct {
		AsOf     uint64         `json:"as_of_sequence"`
		Resolved []HistoryEntry `json:"resolved"`
		Next     string         `json:"next_cursor,omitempty"`
	}{AsOf: head.Latest, Resolved: entries}
	if page.Next != 0 {
		ans.Next = makeCursor(page.Next, p.digest)
	}
	writeJSON(w, http.StatusOK, ans)
}

// historyEntry is the HistoryEntry of the resolution m of req.
func historyEntry(req *aais.Request, m *aais.Message) HistoryEntry {
	res := m.Resolution
	e := HistoryEntry{RequestID: res.RequestID, Outcome: res.Outcome, EffectiveScope: res.EffectiveScope,
		Message: res.Message, ResolvedAt: res.ResolvedAt.String(), Sequence: m.Sequence, SupersededBy: supersededBy(res),
		ActionKind: req.Action.Kind(), ActionName: req.Action.Name(), Summary: req.Action.Summary(), Profile: aais.ProfileOf(req),
		Agent: req.Origin.AgentID, Risk: req.Risk.Level, Response: aais.ResponseOf(res)}
	e.Question, _ = aais.Question(req)
	if actor, words, ok := aais.DecidedBy(res); ok {
		e.Actor, e.Justification = &actor, words
	} else if raw, ok := res.Extensions[aais.RuleExtension]; ok {
		var ref struct {
			RuleID     string   `json:"rule_id"`
			ApprovedBy string   `json:"approved_by"`
			Because    []string `json:"because"`
		}
		if json.Unmarshal(raw, &ref) == nil {
			e.RuleID, e.Because = ref.RuleID, ref.Because
			if ref.ApprovedBy != "" {
				e.Actor = &aais.Actor{ID: ref.ApprovedBy, Type: aais.ActorHuman}
			}
		}
	}
	return e
}
