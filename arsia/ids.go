package arsia

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"time"
)

// TimestampLayout is the wire form of ts, expires_at and every other ARSIA
// timestamp: UTC, exactly three fractional digits, "Z".
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// FormatTimestamp returns t in TimestampLayout (UTC, truncated to the
// millisecond).
func FormatTimestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// ParseTimestamp parses a wire timestamp. Anything but exactly
// YYYY-MM-DDTHH:MM:SS.mmmZ fails with ErrInvalidTimestamp.
func ParseTimestamp(s string) (time.Time, error) {
	if !timestampRE.MatchString(s) {
		return time.Time{}, fmt.Errorf("%w: %s is not of the form YYYY-MM-DDTHH:MM:SS.mmmZ", ErrInvalidTimestamp, pyRepr(truncateForMessage(s)))
	}
	t, err := time.Parse(TimestampLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %v", ErrInvalidTimestamp, pyRepr(s), err)
	}
	return t, nil
}

var messageIDRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// ValidMessageID reports whether s is a lowercase UUID v4, the only form
// allowed for a message id.
func ValidMessageID(s string) bool { return messageIDRE.MatchString(s) }

// NewID returns a fresh lowercase UUID v4 from crypto/rand.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // documented never to fail: it aborts the program instead
	return formatUUIDv4(b)
}

// newIDFrom reads a UUID v4 from r.
func newIDFrom(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", err
	}
	return formatUUIDv4(b), nil
}

func formatUUIDv4(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
