package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/pgutil"
	"github.com/custos-runtime/custos/store/internal/historysql"
)

var _ aais.HistorySearcher = (*Store)(nil)

// pgJSON reads a JSON string member of a bytea column holding an event's
// JSON. It goes through json, not jsonb: jsonb refuses a \u0000 escape
// anywhere in the document, json only in the member read.
func pgJSON(col string) func(path ...string) string {
	return func(path ...string) string {
		elems := make([]string, len(path))
		for i, k := range path {
			elems[i] = `"` + k + `"`
		}
		return "(convert_from(" + col + ", 'UTF8')::json #>> " + historysql.Quote("{"+strings.Join(elems, ",")+"}") + ")"
	}
}

var pgDialect = historysql.Dialect{
	Request:    pgJSON("r.event"),
	Resolution: pgJSON("s.event"),
	Param:      func(n int) string { return "$" + historysql.Itoa(n) },
}

// SearchHistory implements aais.HistorySearcher: the resolutions newest
// first, narrowed by the JSON members of their events, in batches until
// the page is full.
func (s *Store) SearchHistory(ctx context.Context, q aais.HistoryQuery) (aais.HistoryPage, error) {
	if err := ctx.Err(); err != nil {
		return aais.HistoryPage{}, err
	}
	if err := q.Check(); err != nil {
		return aais.HistoryPage{}, err
	}
	where, args := historysql.Where(pgDialect, q)
	query := `SELECT s.sequence, r.event, r.fingerprint, r.owner, s.event, s.decision_fingerprint
		FROM resolutions s JOIN requests r ON r.id = s.request_id
		WHERE s.sequence < $1` + where + ` ORDER BY s.sequence DESC LIMIT ` + pgDialect.Param(len(args)+2)
	before := int64(aais.MaxSequence) + 1
	if q.Before != 0 {
		before = int64(q.Before)
	}
	c := aais.NewHistoryCollector(q)
	for {
		n := historysql.Batch(q, c.Scanned())
		type row struct {
			seq             int64
			req, owner, res []byte
			fp, dfp         string
		}
		var rows []row
		err := s.read(ctx, func(ctx context.Context) error {
			rows = nil
			rs, err := pgutil.Reader(ctx, s.pool).Query(ctx, query, append(append([]any{before}, args...), n)...)
			if err != nil {
				return err
			}
			var r row
			_, err = pgx.ForEachRow(rs, []any{&r.seq, &r.req, &r.fp, &r.owner, &r.res, &r.dfp}, func() error {
				rows = append(rows, r)
				r = row{}
				return nil
			})
			return err
		})
		if err != nil {
			return aais.HistoryPage{}, wrap(err)
		}
		for _, r := range rows {
			req, err := requestRecord(r.req, r.fp, r.owner)
			if err != nil {
				return aais.HistoryPage{}, err
			}
			res, err := resolutionRecord(r.res, r.dfp)
			if err != nil {
				return aais.HistoryPage{}, err
			}
			if !c.Add(req, res) {
				return c.Page(false), nil
			}
			before = r.seq
		}
		if len(rows) < n {
			return c.Page(true), nil
		}
	}
}
