package aais

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Timestamp is an RFC 3339 date-time as it appeared on the wire, together
// with the instant it names. Keeping the text means a parsed message is
// written back exactly as received (offset and fraction digits included);
// keeping the instant means comparisons are between instants, never between
// strings ("18:00:00+02:00" is before "17:00:00Z").
//
// The zero Timestamp means "absent" (an optional member such as expires_at).
type Timestamp struct {
	text string
	utc  time.Time // the instant, in UTC so that equal texts give == values
}

var errTimestamp = errors.New("not an RFC 3339 date-time with an explicit offset")

// ParseTimestamp reads an RFC 3339 date-time. It requires an upper-case
// "T", an explicit "Z" or ±hh:mm offset (upper-case "Z"; the reference
// libraries refuse a lower-case one), and an instant Go can represent, which
// excludes leap seconds ("23:59:60").
func ParseTimestamp(s string) (Timestamp, error) {
	if !wellFormedTimestamp(s) {
		return Timestamp{}, fmt.Errorf("%w: %q", errTimestamp, s)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Timestamp{}, fmt.Errorf("%w: %q", errTimestamp, s)
	}
	return Timestamp{text: s, utc: t.UTC()}, nil
}

// wellFormedTimestamp checks the shape time.Parse is lenient about:
// "YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)" with ASCII digits only.
func wellFormedTimestamp(s string) bool {
	const base = len("2006-01-02T15:04:05")
	if len(s) < base+1 {
		return false
	}
	for i := 0; i < base; i++ {
		c := s[i]
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' {
				return false
			}
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	rest := s[base:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z":
		return true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		for _, i := range []int{1, 2, 4, 5} {
			if rest[i] < '0' || rest[i] > '9' {
				return false
			}
		}
		return true
	}
	return false
}

// NewTimestamp formats t in UTC as RFC 3339 with as many fraction digits as
// it needs ("2026-08-30T18:01:00Z"). Years outside 0000..9999 have no RFC
// 3339 form and are refused.
func NewTimestamp(t time.Time) (Timestamp, error) {
	if t.IsZero() {
		return Timestamp{}, fmt.Errorf("%w: zero time", ErrBuild)
	}
	u := t.UTC()
	if y := u.Year(); y < 0 || y > 9999 {
		return Timestamp{}, fmt.Errorf("%w: year %d has no RFC 3339 form", ErrBuild, y)
	}
	return Timestamp{text: u.Format(time.RFC3339Nano), utc: u}, nil
}

// Time returns the instant, in UTC; the zero time.Time when ts is zero.
func (ts Timestamp) Time() time.Time { return ts.utc }

// String returns the text as it appeared on the wire.
func (ts Timestamp) String() string { return ts.text }

// IsZero reports whether ts is absent.
func (ts Timestamp) IsZero() bool { return ts.text == "" }

// MarshalJSON writes the text as received.
func (ts Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(ts.text)
}

// UnmarshalJSON reads a string with ParseTimestamp.
func (ts *Timestamp) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	t, err := ParseTimestamp(s)
	if err != nil {
		return err
	}
	*ts = t
	return nil
}
