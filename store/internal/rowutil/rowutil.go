// Package rowutil is what the SQL stores share to read rows and keep times.
package rowutil

import "time"

// ToNanos is how the stores keep a time: Unix nanoseconds, 0 for the zero
// time. FromNanos reads it back (UTC).
func ToNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromNanos is the time ToNanos kept as n.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Rows is what CollectRows reads: database/sql's and pgx's result sets.
type Rows interface {
	Next() bool
	Err() error
}

// CollectRows reads every row of rows with scan, for the stores' list
// queries.
func CollectRows[T any](rows Rows, scan func() (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
