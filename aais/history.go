package aais

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The resolution history: which requests ended how, searched newest first.
// A store that can answer the search with a query of its own implements
// HistorySearcher; SearchHistory falls back to reading the event log
// (ScanHistory) for one that cannot. Either way the one rule that decides
// whether a resolution matches is HistoryQuery.Matches: a store's query
// only narrows the rows it hands to a HistoryCollector, so every store
// answers the same search with the same page.

// Bounds of a history search.
const (
	// MaxHistoryLimit is the largest page a search returns.
	MaxHistoryLimit = 200
	// HistoryScanLimit is how many resolutions one search examines at
	// most before it returns what it found with a cursor to go on from:
	// a narrow search over a long history answers in bounded time, with a
	// short (even empty) page and a cursor.
	HistoryScanLimit = 5000
)

// ExchangeProfileExtension is the request extension a gateway records its
// exchange in ("custos.dev/exchange", the value of gateway.ExchangeExtension,
// which this package cannot import): its "profile" member is the request's
// compliance profile.
const ExchangeProfileExtension = "custos.dev/exchange"

// HistoryQuery is a history search. Empty fields do not filter. Every
// string filter is an exact match.
type HistoryQuery struct {
	// Agent is the requesting agent (origin.agent_id).
	Agent string
	// Capability is the action name.
	Capability string
	// Reviewer is who decided (ReviewerOf).
	Reviewer string
	// Profile is the compliance profile (ProfileOf).
	Profile string
	// Outcome is the receipt's outcome.
	Outcome Outcome
	// Risk is the request's risk level.
	Risk RiskLevel
	// Since and Until bound resolved_at: at or after Since, before Until.
	// The zero time does not bound.
	Since, Until time.Time
	// Before, when not 0, continues a search: only resolutions whose
	// event sequence is below it (HistoryPage.Next).
	Before uint64
	// Limit is the page size, 1..MaxHistoryLimit.
	Limit int
	// Visible, when set, says whether the caller may see a resolution;
	// one it may not see is skipped as one that does not match.
	Visible func(req *Request, res *Resolution) bool
}

// Check reports whether q is a search a store may run.
func (q HistoryQuery) Check() error {
	if q.Limit < 1 || q.Limit > MaxHistoryLimit {
		return fmt.Errorf("%w: history limit %d: want 1 to %d", ErrInvalid, q.Limit, MaxHistoryLimit)
	}
	if q.Outcome != "" && (!q.Outcome.Valid() || q.Outcome == OutcomeConflict) {
		return fmt.Errorf("%w: history outcome %q", ErrInvalid, q.Outcome)
	}
	switch q.Risk {
	case "", RiskLow, RiskMedium, RiskHigh, RiskCritical:
	default:
		return fmt.Errorf("%w: history risk %q", ErrInvalid, q.Risk)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return fmt.Errorf("%w: history since is not before until", ErrInvalid)
	}
	if q.Before > MaxSequence {
		return fmt.Errorf("%w: history cursor beyond the largest sequence", ErrInvalid)
	}
	return nil
}

// Matches reports whether the resolution res of request req is one q
// finds (the cursor aside).
func (q HistoryQuery) Matches(req *Request, res *Resolution) bool {
	if req == nil || res == nil {
		return false
	}
	switch {
	case q.Agent != "" && req.Origin.AgentID != q.Agent,
		q.Capability != "" && req.Action.Name() != q.Capability,
		q.Outcome != "" && res.Outcome != q.Outcome,
		q.Risk != "" && req.Risk.Level != q.Risk,
		q.Profile != "" && ProfileOf(req) != q.Profile,
		q.Reviewer != "" && ReviewerOf(res) != q.Reviewer,
		!q.Since.IsZero() && res.ResolvedAt.Time().Before(q.Since),
		!q.Until.IsZero() && !res.ResolvedAt.Time().Before(q.Until):
		return false
	}
	return q.Visible == nil || q.Visible(req, res)
}

// ProfileOf is the compliance profile of req: the profile of its
// ExchangeProfileExtension when it names one, otherwise origin.profile.
func ProfileOf(req *Request) string {
	var ref struct {
		Profile string `json:"profile"`
	}
	if raw, ok := req.Extensions[ExchangeProfileExtension]; ok && json.Unmarshal(raw, &ref) == nil && ref.Profile != "" {
		return ref.Profile
	}
	return req.Origin.Profile
}

// ReviewerOf is the id of who decided res: the decision's actor
// (DecidedBy), or the reviewer whose remembered rule approved it
// (RuleExtension's approved_by); "" when nobody did (expiry, the runtime).
func ReviewerOf(res *Resolution) string {
	if a, _, ok := DecidedBy(res); ok {
		return a.ID
	}
	var ref struct {
		ApprovedBy string `json:"approved_by"`
	}
	if raw, ok := res.Extensions[RuleExtension]; ok && json.Unmarshal(raw, &ref) == nil {
		return ref.ApprovedBy
	}
	return ""
}

// HistoryEntry is one resolution a search found, with its request.
type HistoryEntry struct {
	Request    RequestRecord
	Resolution ResolutionRecord
}

// Sequence is the sequence of the resolution's event.
func (e HistoryEntry) Sequence() uint64 { return e.Resolution.Event.Sequence }

// HistoryPage is one page of a search, newest first.
type HistoryPage struct {
	Entries []HistoryEntry
	// Next, when not 0, is the HistoryQuery.Before that continues the
	// search; 0 means there is nothing more.
	Next uint64
}

// HistorySearcher is a Store that searches its history with a query of
// its own. Its answer must be the one ScanHistory gives.
type HistorySearcher interface {
	SearchHistory(ctx context.Context, q HistoryQuery) (HistoryPage, error)
}

// SearchHistory runs q on s: with its own query when s is a
// HistorySearcher, otherwise by reading its event log (ScanHistory).
func SearchHistory(ctx context.Context, s Store, q HistoryQuery) (HistoryPage, error) {
	if hs, ok := s.(HistorySearcher); ok {
		return hs.SearchHistory(ctx, q)
	}
	return ScanHistory(ctx, s, q)
}

// historyWindow is how many events ScanHistory reads at a time.
const historyWindow = 512

// ScanHistory answers q from what every Store has: it reads the event log
// backwards in windows and each resolution's request. It is the reference
// a HistorySearcher's answer is compared with.
func ScanHistory(ctx context.Context, s Store, q HistoryQuery) (HistoryPage, error) {
	if err := q.Check(); err != nil {
		return HistoryPage{}, err
	}
	head, err := s.EventsAfter(ctx, MaxSequence, 1)
	if err != nil {
		return HistoryPage{}, err
	}
	end := head.Latest + 1 // events below end are still to be read
	if q.Before != 0 {
		end = min(end, q.Before)
	}
	c := NewHistoryCollector(q)
	for end > 1 && end-1 > head.CompactedThrough {
		after := max(end-1, historyWindow) - historyWindow
		after = max(after, head.CompactedThrough)
		page, err := s.EventsAfter(ctx, after, int(end-1-after))
		if err != nil {
			return HistoryPage{}, err
		}
		if page.Gap {
			return HistoryPage{}, fmt.Errorf("%w: the event log was reset or compacted during a history search", ErrInvalid)
		}
		for i := len(page.Events) - 1; i >= 0; i-- {
			m := page.Events[i]
			if m.Type != TypeResolved || m.Sequence >= end {
				continue
			}
			st, err := s.RequestState(ctx, m.Resolution.RequestID)
			if err != nil {
				return HistoryPage{}, err
			}
			if !c.Add(st.Request, ResolutionRecord{Event: m}) {
				return c.Page(false), nil
			}
		}
		end = after + 1
	}
	return c.Page(true), nil
}

// HistoryCollector builds the page of a search from the resolutions a
// store hands it, newest first: a HistorySearcher reads candidate rows
// (its query may let through rows that do not match, never leave out rows
// that do) and adds them until Add says it has enough.
type HistoryCollector struct {
	q       HistoryQuery
	found   []HistoryEntry
	scanned int
	last    uint64
	full    bool
}

// NewHistoryCollector returns a collector for q (checked with Check first).
func NewHistoryCollector(q HistoryQuery) *HistoryCollector { return &HistoryCollector{q: q} }

// Add examines one resolution, which must be older than every one added
// before; it reports whether the collector wants more.
func (c *HistoryCollector) Add(req RequestRecord, res ResolutionRecord) bool {
	if c.full || res.Event == nil || req.Event == nil {
		return !c.full
	}
	c.scanned++
	c.last = res.Event.Sequence
	if c.q.Matches(req.Event.Request, res.Event.Resolution) {
		if len(c.found) == c.q.Limit {
			// One more match than the page holds: there is a next page.
			c.full = true
			return false
		}
		c.found = append(c.found, HistoryEntry{Request: req, Resolution: res})
	}
	if c.scanned >= HistoryScanLimit {
		c.full = true
		return false
	}
	return true
}

// Scanned is how many resolutions Add examined.
func (c *HistoryCollector) Scanned() int { return c.scanned }

// Page is the page found; exhausted says the store has no older
// resolution to add.
func (c *HistoryCollector) Page(exhausted bool) HistoryPage {
	p := HistoryPage{Entries: c.found}
	if p.Entries == nil {
		p.Entries = []HistoryEntry{}
	}
	if exhausted && !c.full {
		return p
	}
	switch {
	case len(c.found) == c.q.Limit:
		// The page is full: go on below its last entry.
		p.Next = c.found[len(c.found)-1].Sequence()
	case c.last > 1:
		// The scan limit was reached: go on below what was examined.
		p.Next = c.last
	}
	return p
}
