package relay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// HeaderVia is the HTTP header in which brokers list themselves when they
// forward a message: the agent ids of the brokers the message passed
// through, oldest first, separated by commas ("agent:a.broker,
// agent:b.broker"). A broker refuses a message whose list names it already
// (a loop) or would grow past its hop limit. The header is not signed: it
// guards against brokers misconfigured into a cycle, which add themselves
// honestly, not against a sender (who can only shorten its own path).
const HeaderVia = "ARSIA-Relay-Via"

// Bounds of the via list, whatever a broker's hop limit.
const (
	// MaxViaEntries caps the brokers it may name.
	MaxViaEntries = 32
	// MaxViaBytes caps the header's value: room for MaxViaEntries of the
	// longest agent ids (256 bytes) and their separators.
	MaxViaBytes = MaxViaEntries * (256 + 4)
)

// ErrVia is the error of a via list that cannot be read.
var ErrVia = errors.New("relay: malformed " + HeaderVia + " header")

// ParseVia reads the values of the via header (several header lines count
// as one list, in order). Blank values are skipped; none left is an empty list.
// Every entry must be an ARSIA agent id; empty entries, more than
// MaxViaEntries entries or more than MaxViaBytes are errors (ErrVia).
// Duplicates are returned as they are: they are a loop, for the caller.
func ParseVia(values []string) ([]string, error) {
	n := 0
	var lines []string
	for _, v := range values {
		n += len(v) + 1
		if n > MaxViaBytes+1 {
			return nil, fmt.Errorf("%w: longer than %d bytes", ErrVia, MaxViaBytes)
		}
		if strings.Trim(v, " \t") != "" {
			lines = append(lines, v)
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	var out []string
	for i, part := range strings.Split(strings.Join(lines, ","), ",") {
		id := strings.Trim(part, " \t")
		switch {
		case id == "":
			return nil, fmt.Errorf("%w: entry %d is empty", ErrVia, i)
		case !arsia.ValidAgentID(id):
			return nil, fmt.Errorf("%w: entry %d is not an agent id", ErrVia, i)
		case len(out) == MaxViaEntries:
			return nil, fmt.Errorf("%w: more than %d entries", ErrVia, MaxViaEntries)
		}
		out = append(out, id)
	}
	return out, nil
}

// FormatVia is the header value listing ids.
func FormatVia(ids []string) string { return strings.Join(ids, ", ") }
