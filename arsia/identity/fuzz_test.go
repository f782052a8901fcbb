package identity

import (
	"crypto/x509/pkix"
	"strings"
	"testing"
)

// FuzzChain feeds arbitrary text to every chain parser. None may panic,
// and the classifier and the verifier must agree with the parser: a chain
// that does not parse is L1 for both.
func FuzzChain(f *testing.F) {
	p := newTestPKI(f)
	leaf, _ := p.leaf(f, leafOpts{})
	qc, _ := p.leaf(f, leafOpts{extra: []pkix.Extension{qcExtension(f)}})
	f.Add(leaf, p.inter.pem)
	f.Add(qc, p.inter.pem)
	f.Add("not a pem", "")
	f.Add("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "")
	f.Add(leaf[:len(leaf)/2], leaf)
	opts := p.opts()
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, chain := range [][]string{{a}, {a, b}, strings.SplitAfter(a, "-----END CERTIFICATE-----\n")} {
			_, parseErr := ParseChain(chain)
			claimed := ClassifyChain(chain)
			if parseErr != nil && claimed != L1 {
				t.Fatalf("unparseable chain classified %v", claimed)
			}
			if !claimed.Valid() {
				t.Fatalf("classified %v", claimed)
			}
			level, err := VerifyChain(chain, opts)
			if !level.Valid() || level > claimed && parseErr == nil {
				t.Fatalf("verified %v above claimed %v", level, claimed)
			}
			if parseErr != nil && err == nil {
				t.Fatal("unparseable chain verified without error")
			}
			if _, err := HasQCStatements(a); err != nil && ClassifyChain([]string{a}) != L1 {
				t.Fatal("HasQCStatements refuses what ClassifyChain parses")
			}
		}
	})
}

// FuzzParseIdentityRecord checks that record parsing never panics and that
// an accepted record survives Map and re-validation.
func FuzzParseIdentityRecord(f *testing.F) {
	f.Add([]byte(sampleRecord))
	f.Add([]byte(`{"agent_id":"agent:a.b","certificate_chain":[]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseIdentityRecord(data)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted record does not validate: %v", err)
		}
		_ = r.ClaimedTrustLevel()
	})
}
