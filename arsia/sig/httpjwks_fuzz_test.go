package sig

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseMaxAge feeds arbitrary Cache-Control values (the key server
// chooses them) to the JWKS fetcher's parser. An accepted max-age is a
// whole number of seconds that fits in 32 bits, which "max-age=N" reads
// back as the same; two header lines mean what their comma-joined form
// means (RFC 9110 §5.3); and the freshness the fetcher uses is never
// negative nor above MaxMaxAge.
func FuzzParseMaxAge(f *testing.F) {
	for _, s := range []string{
		"max-age=300", "public, max-age=86400", `max-age="60"`, "MAX-AGE=5", "no-store", "no-cache, max-age=60",
		"max-age=4294967295", "max-age=4294967296", "max-age=-1", "max-age=", "max-age", "private,,max-age=1",
		" max-age = 1", "s-maxage=10, max-age=20", "max-age=1e3",
	} {
		f.Add(s, "")
		f.Add("immutable", s)
	}
	h, err := NewHTTPJWKS("https://keys.example/jwks.json", &HTTPJWKSOptions{MaxMaxAge: 6 * time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v1, v2 string) {
		values := []string{v1, v2}
		age, ok := parseMaxAge(values)
		if age < 0 || age > (1<<32-1)*time.Second || age%time.Second != 0 {
			t.Fatalf("%q: max-age %v", values, age)
		}
		if !ok && age != 0 {
			t.Fatalf("%q: unusable but %v", values, age)
		}
		if a2, ok2 := parseMaxAge([]string{v1 + "," + v2}); a2 != age || ok2 != ok {
			t.Fatalf("%q: %v %v, joined %v %v", values, age, ok, a2, ok2)
		}
		if ok && age > 0 {
			enc := "max-age=" + strconv.FormatInt(int64(age/time.Second), 10)
			if a2, ok2 := parseMaxAge([]string{enc}); a2 != age || !ok2 {
				t.Fatalf("%q → %v → %q → %v %v", values, age, enc, a2, ok2)
			}
			if !strings.Contains(strings.ToLower(v1+","+v2), "max-age") {
				t.Fatalf("%q: a max-age without max-age", values)
			}
		}
		hdr := http.Header{"Cache-Control": values}
		if got := h.maxAge(hdr); got < 0 || got > h.opts.MaxMaxAge || (!ok && got != min(h.opts.DefaultMaxAge, h.opts.MaxMaxAge)) {
			t.Fatalf("%q: freshness %v", values, got)
		}
	})
}
