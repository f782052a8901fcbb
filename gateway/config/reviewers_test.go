package config

import (
	"strings"
	"testing"
)

// allowed_origins takes exact browser origins only: what an Origin header
// carries, so that the comparison with it is exact.
func TestAllowedOrigins(t *testing.T) {
	for origin, ok := range map[string]bool{
		"https://review.example":      true,
		"http://127.0.0.1:8080":       true,
		"https://[::1]:8443":          true,
		"https://review.example/":     false,
		"https://review.example/path": false,
		"https://Review.example":      false,
		"ftp://review.example":        false,
		"review.example":              false,
		"https://user@review.example": false,
		"https://review.example?x=1":  false,
		"https://review.example#x":    false,
		"null":                        false,
		"":                            false,
	} {
		c := Default()
		if err := c.Decode(strings.NewReader("allowed_origins: [\""+origin+"\"]\n"), "test"); err != nil {
			t.Fatal(err)
		}
		err := c.Check()
		if (err == nil) != ok {
			t.Errorf("%q: %v, want accepted %v", origin, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "allowed_origins[0]") {
			t.Errorf("%q: %v does not name the key", origin, err)
		}
	}
}
