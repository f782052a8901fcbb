package sqlitestore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/sqlitedb"
	"github.com/custos-runtime/custos/store/internal/historysql"
)

var _ aais.HistorySearcher = (*Store)(nil)

// sqliteJSON reads a JSON string member of an event's JSON column. The
// column is a BLOB, which SQLite would read as JSONB: it is cast to TEXT.
func sqliteJSON(col string) func(path ...string) string {
	return func(path ...string) string {
		var p strings.Builder
		p.WriteString("$")
		for _, k := range path {
			p.WriteString(`."` + k + `"`)
		}
		return "json_extract(CAST(" + col + " AS TEXT), " + historysql.Quote(p.String()) + ")"
	}
}

var sqliteDialect = historysql.Dialect{
	Request:    sqliteJSON("q.json"),
	Resolution: sqliteJSON("f.json"),
	Param:      func(int) string { return "?" },
}

// SearchHistory implements aais.HistorySearcher: the resolutions newest
// first, narrowed by json_extract over the events they point to, in
// batches until the page is full.
func (s *Store) SearchHistory(ctx context.Context, q aais.HistoryQuery) (aais.HistoryPage, error) {
	if err := ctx.Err(); err != nil {
		return aais.HistoryPage{}, err
	}
	if err := q.Check(); err != nil {
		return aais.HistoryPage{}, err
	}
	where, args := historysql.Where(sqliteDialect, q)
	query := `SELECT s.sequence, q.json, r.fingerprint, r.owner, f.json, s.decision_fingerprint
		FROM resolutions s JOIN requests r ON r.id = s.request_id
		JOIN events q ON q.sequence = r.sequence JOIN events f ON f.sequence = s.sequence
		WHERE s.sequence < ?` + where + ` ORDER BY s.sequence DESC LIMIT ?`
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
		err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
			rows = nil
			rs, err := tx.QueryContext(ctx, query, append(append([]any{before}, args...), n)...)
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				var (
					r   row
					own sql.RawBytes
				)
				if err := rs.Scan(&r.seq, &r.req, &r.fp, &own, &r.res, &r.dfp); err != nil {
					return err
				}
				if own != nil {
					r.owner = append([]byte{}, own...)
				}
				rows = append(rows, r)
			}
			return rs.Err()
		})
		if err != nil {
			return aais.HistoryPage{}, wrap(err)
		}
		for _, r := range rows {
			req, err := requestRecord(nil, r.req, r.fp, r.owner)
			if err != nil {
				return aais.HistoryPage{}, err
			}
			res, err := resolutionRecord(nil, r.res, r.dfp)
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
