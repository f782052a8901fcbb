// Package historysql builds the WHERE clause with which the SQL stores
// narrow a history search (aais.HistoryQuery) to candidate rows. The
// clause may let through rows that do not match (aais.HistoryCollector
// decides with HistoryQuery.Matches), never leave out one that does:
// every string filter compares the JSON member Matches reads, either of
// two members where Matches picks one of them, and the time bounds
// compare calendar dates with a day's margin for the offsets a timestamp
// may carry.
package historysql

import (
	"strconv"
	"strings"

	"github.com/custos-runtime/custos/aais"
)

// Dialect says how a store reads a JSON member and numbers parameters.
type Dialect struct {
	// Request and Resolution return the SQL text of the JSON string at
	// path (members from the message's root) of the request's and the
	// resolution's event.
	Request, Resolution func(path ...string) string
	// Param returns the placeholder of the n-th parameter (1-based).
	Param func(n int) string
}

// Where returns the conditions for q after the cursor condition (which
// the caller writes as parameter 1), joined with AND and each starting
// with " AND ", and their arguments.
func Where(d Dialect, q aais.HistoryQuery) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	param := func(v any) string {
		args = append(args, v)
		return d.Param(len(args) + 1)
	}
	eq := func(expr string, v string) {
		b.WriteString(" AND " + expr + " = " + param(v))
	}
	either := func(a, c, v string) {
		b.WriteString(" AND (" + a + " = " + param(v) + " OR " + c + " = " + param(v) + ")")
	}
	if q.Agent != "" {
		eq(d.Request("request", "origin", "agent_id"), q.Agent)
	}
	if q.Capability != "" {
		eq(d.Request("request", "action", "name"), q.Capability)
	}
	if q.Risk != "" {
		eq(d.Request("request", "risk", "level"), string(q.Risk))
	}
	if q.Profile != "" {
		either(d.Request("request", "extensions", aais.ExchangeProfileExtension, "profile"),
			d.Request("request", "origin", "profile"), q.Profile)
	}
	if q.Outcome != "" {
		eq(d.Resolution("resolution", "outcome"), string(q.Outcome))
	}
	if q.Reviewer != "" {
		either(d.Resolution("resolution", "extensions", aais.DecisionExtension, "actor", "id"),
			d.Resolution("resolution", "extensions", aais.RuleExtension, "approved_by"), q.Reviewer)
	}
	day := "substr(" + d.Resolution("resolution", "resolved_at") + ", 1, 10)"
	if !q.Since.IsZero() {
		b.WriteString(" AND " + day + " >= " + param(q.Since.UTC().AddDate(0, 0, -1).Format("2006-01-02")))
	}
	if !q.Until.IsZero() {
		b.WriteString(" AND " + day + " <= " + param(q.Until.UTC().AddDate(0, 0, 1).Format("2006-01-02")))
	}
	return b.String(), args
}

// Batch is how many rows the search reads next, having read n already:
// one more than the page at first, then growing, never beyond what the
// scan limit leaves.
func Batch(q aais.HistoryQuery, n int) int {
	size := q.Limit + 1
	if n > 0 {
		size = max(4*n, size)
	}
	return max(1, min(size, aais.HistoryScanLimit-n))
}

// Quote returns s as an SQL string literal.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Itoa is strconv.Itoa, for placeholders.
func Itoa(n int) string { return strconv.Itoa(n) }
