package pgstore

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParsePayload feeds arbitrary NOTIFY payloads (anyone who may NOTIFY
// on the channel chooses them) to parsePayload. An accepted payload is
// exactly "<store_id>:<sequence>" with a non-empty store id free of ':' and
// a decimal uint64; its re-encoding parses to the same notification, and
// equals the payload when the sequence is written without leading zeros. A
// parsed notification is never a resync.
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{
		"3f2a9c1e-0d4b-4c8e-9a7f-5b6c7d8e9f00:0", "s:18446744073709551615", "s:18446744073709551616",
		":1", "s:", "s:-1", "s:+1", "s:007", "s:1:2", "s: 1", "s:0x10", "s:1_000", "no-colon", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		n, ok := parsePayload(p)
		if !ok {
			if n != (Notification{}) {
				t.Fatalf("refused %q but returned %+v", p, n)
			}
			return
		}
		if n.Resync || n.StoreID == "" || strings.Contains(n.StoreID, ":") {
			t.Fatalf("accepted %q as %+v", p, n)
		}
		enc := n.StoreID + ":" + strconv.FormatUint(n.Sequence, 10)
		back, ok := parsePayload(enc)
		if !ok || back != n {
			t.Fatalf("%q → %+v → %q → %+v, %v", p, n, enc, back, ok)
		}
		seq := p[len(n.StoreID)+1:]
		if seq == "" || strings.Trim(seq, "0123456789") != "" {
			t.Fatalf("accepted %q with sequence %q", p, seq)
		}
		if (len(seq) == 1 || seq[0] != '0') && enc != p {
			t.Fatalf("canonical payload %q re-encodes as %q", p, enc)
		}
	})
}
