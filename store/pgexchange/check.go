package pgexchange

import (
	"strings"
	"unicode/utf8"
)

// cleanText makes s storable as PostgreSQL text of at most max bytes:
// valid UTF-8, no NUL, cut on a character boundary.
func cleanText(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
