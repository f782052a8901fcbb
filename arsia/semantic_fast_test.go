package arsia

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// mutateID derives strings near s over the characters the agent-id and
// capability grammars care about.
func mutateID(rng *rand.Rand, s string) string {
	const alphabet = "aZ09-_./*:#é\n "
	b := []byte(s)
	for n := rng.IntN(3) + 1; n > 0; n-- {
		switch op := rng.IntN(4); {
		case op == 0 && len(b) > 0:
			b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
		case op == 1:
			b = slices.Insert(b, rng.IntN(len(b)+1), alphabet[rng.IntN(len(alphabet))])
		case op == 2 && len(b) > 0:
			i := rng.IntN(len(b))
			b = slices.Delete(b, i, i+1)
		default:
			b = append(b, strings.Repeat("a", rng.IntN(300))...)
		}
	}
	return string(b)
}

// The shortcuts of ValidateSemantic must only ever skip work whose outcome
// is "no issue".
func TestWellFormedAgentIDImpliesParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	accepted := 0
	for _, base := range []string{"agent:acme.billing", "agent:a.b.c-d/x_y-1", "agent:a.b/", "agent:a", "agent:-a.b", "agent:a." + strings.Repeat("b", 249)} {
		for range 5000 {
			s := mutateID(rng, base)
			if wellFormedAgentID(s) {
				accepted++
				if _, problem := parseAgentID(s); problem != "" {
					t.Fatalf("%q: shortcut accepts, parseAgentID says %s", s, problem)
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("shortcut never taken")
	}
}

func TestPlainConcreteCapabilityImpliesValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	accepted := 0
	for _, base := range []string{"billing.invoice.create", "a.b", "arsiaprotocol.state.read", "notes.*", "a1.2b"} {
		for range 5000 {
			s := mutateID(rng, base)
			if plainConcreteCapability(s) {
				accepted++
				if err := ValidateCapability(s); err != nil || IsWildcardCapability(s) {
					t.Fatalf("%q: shortcut accepts, ValidateCapability says %v (wildcard %v)", s, err, IsWildcardCapability(s))
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("shortcut never taken")
	}
}

func TestDuplicateStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 5000 {
		arr := make([]any, rng.IntN(24))
		for i := range arr {
			if rng.IntN(10) == 0 {
				arr[i] = i
			} else {
				arr[i] = string(rune('a' + rng.IntN(6)))
			}
		}
		// The map-based computation duplicateStrings replaced.
		var want []string
		seen := map[string]bool{}
		for _, item := range arr {
			if s, ok := item.(string); ok {
				if seen[s] && !slices.Contains(want, s) {
					want = append(want, s)
				}
				seen[s] = true
			}
		}
		if got := duplicateStrings(arr); !slices.Equal(got, want) {
			t.Fatalf("%v: got %q, want %q", arr, got, want)
		}
	}
}

func FuzzSemanticShortcuts(f *testing.F) {
	for _, s := range []string{"agent:acme.billing", "agent:a.b/c", "billing.invoice.create", "a.*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if wellFormedAgentID(s) {
			if _, problem := parseAgentID(s); problem != "" {
				t.Fatalf("%q: %s", s, problem)
			}
		}
		if plainConcreteCapability(s) && (ValidateCapability(s) != nil || IsWildcardCapability(s)) {
			t.Fatalf("%q: capability shortcut wrong", s)
		}
	})
}

// parseTimestamp must agree with ParseTimestamp everywhere.
func TestParseTimestampShortcut(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var samples []string
	for _, y := range []int{0, 1, 1900, 1999, 2000, 2024, 2026, 2100, 9999} {
		for m := 0; m <= 13; m++ {
			for _, d := range []int{0, 1, 28, 29, 30, 31, 32} {
				samples = append(samples, fmt.Sprintf("%04d-%02d-%02dT23:59:59.999Z", y, m, d))
			}
		}
	}
	samples = append(samples, "2026-03-24T24:00:00.000Z", "2026-03-24T10:60:00.000Z", "2026-03-24T10:00:60.000Z",
		"2026-03-24T10:00:00.000z", "2026-03-24T10:00:00.00Z", "2026-03-24 10:00:00.000Z", "2026-03-24T10:00:00.000Z\n")
	base := "2026-03-24T10:00:00.000Z"
	for range 20000 {
		b := []byte(base)
		for n := rng.IntN(3) + 1; n > 0; n-- {
			b[rng.IntN(len(b))] = "0123456789-T:.Z x"[rng.IntN(17)]
		}
		samples = append(samples, string(b))
	}
	for _, s := range samples {
		checkTimestamp(t, s)
	}
}

func checkTimestamp(t *testing.T, s string) {
	got, gotErr := parseTimestamp(s)
	want, wantErr := ParseTimestamp(s)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || got != want || !got.Equal(want) {
		t.Fatalf("%q: got %v %v, want %v %v", s, got, gotErr, want, wantErr)
	}
	if gotErr == nil && got.Location() != time.UTC {
		t.Fatalf("%q: location %v", s, got.Location())
	}
}

func FuzzParseTimestampShortcut(f *testing.F) {
	f.Add("2026-03-24T10:00:00.000Z")
	f.Add("2024-02-29T23:59:59.999Z")
	f.Fuzz(checkTimestamp)
}

// Well-formed timestamps order as strings exactly as their instants do,
// which checkAfterTS relies on, and wellFormedTimestamp implies that
// ParseTimestamp accepts.
func TestWellFormedTimestampOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var stamps []string
	for range 5000 {
		s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", rng.IntN(10000), rng.IntN(14), rng.IntN(33),
			rng.IntN(25), rng.IntN(61), rng.IntN(61), rng.IntN(1000))
		if rng.IntN(4) == 0 && len(stamps) > 0 { // near neighbours
			b := []byte(stamps[rng.IntN(len(stamps))])
			b[22] = byte('0' + rng.IntN(10))
			s = string(b)
		}
		if wellFormedTimestamp(s) {
			if _, err := ParseTimestamp(s); err != nil {
				t.Fatalf("%q well formed, but ParseTimestamp: %v", s, err)
			}
			stamps = append(stamps, s)
		}
	}
	for i := range 20000 {
		a, b := stamps[rng.IntN(len(stamps))], stamps[(i*7919)%len(stamps)]
		ta, _ := ParseTimestamp(a)
		tb, _ := ParseTimestamp(b)
		if (a > b) != ta.After(tb) || (a == b) != ta.Equal(tb) {
			t.Fatalf("%q vs %q: string order disagrees with time order", a, b)
		}
	}
}
