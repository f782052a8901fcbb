package mcpproxy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The policy's globs: '*' matches any run of characters, '/' included;
// '?' matches exactly one character; '\' makes the next character literal.
// Everything else matches itself. A glob matches the whole string.

const maxGlob = 1024

func checkGlob(g string) error {
	if len(g) > maxGlob {
		return fmt.Errorf("the glob is longer than %d bytes", maxGlob)
	}
	if !utf8.ValidString(g) {
		return errors.New("the glob is not valid UTF-8")
	}
	if n := len(g) - len(strings.TrimRight(g, `\`)); n%2 == 1 {
		return fmt.Errorf("%q ends with an unpaired \\", g)
	}
	return nil
}

// globMatch reports whether s matches the whole glob g. It runs in
// O(len(g)·len(s)) time: a star remembers only the last backtrack point.
func globMatch(g, s string) bool {
	gi, si := 0, 0
	starG, starS := -1, 0
	for si < len(s) {
		if gi < len(g) {
			switch c := g[gi]; c {
			case '*':
				starG, starS = gi, si
				gi++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(s[si:])
				gi++
				si += w
				continue
			default:
				lit, w := literal(g, gi)
				if strings.HasPrefix(s[si:], lit) {
					gi += w
					si += len(lit)
					continue
				}
			}
		}
		if starG < 0 {
			return false
		}
		// Let the last star absorb one more character.
		_, w := utf8.DecodeRuneInString(s[starS:])
		starS += w
		gi, si = starG+1, starS
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}

// literal returns the character at g[i] (after a backslash, the escaped
// one) and how many bytes of g it took.
func literal(g string, i int) (string, int) {
	if g[i] == '\\' && i+1 < len(g) {
		_, w := utf8.DecodeRuneInString(g[i+1:])
		return g[i+1 : i+1+w], 1 + w
	}
	_, w := utf8.DecodeRuneInString(g[i:])
	return g[i : i+w], w
}
