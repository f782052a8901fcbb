package identity

import (
	"crypto/x509/pkix"
	"errors"
	"strings"
	"testing"
)

func TestClassifyChain(t *testing.T) {
	p := newTestPKI(t)
	plain, _ := p.leaf(t, leafOpts{})
	qc, _ := p.leaf(t, leafOpts{extra: []pkix.Extension{qcExtension(t)}})
	selfSigned, _ := p.leaf(t, leafOpts{selfSigned: true, sans: []string{"agent:x.y"}})
	tests := []struct {
		name  string
		chain []string
		want  TrustLevel
	}{
		{"nil", nil, L1},
		{"empty", []string{}, L1},
		{"garbage", []string{"not a pem"}, L1},
		{"garbage after leaf", []string{plain, "junk"}, L1},
		{"too long", slicesRepeat(plain, MaxChainLength+1), L1},
		// The classifier verifies nothing: a self-signed certificate
		// claims L2, as in the reference SDK.
		{"self-signed", []string{selfSigned}, L2},
		{"CA-issued", []string{plain, p.inter.pem}, L2},
		{"qualified leaf", []string{qc, p.inter.pem}, L3},
		{"qualified intermediate does not count", []string{plain, qc}, L2},
	}
	for _, tc := range tests {
		if got := ClassifyChain(tc.chain); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestHasQCStatements(t *testing.T) {
	p := newTestPKI(t)
	plain, _ := p.leaf(t, leafOpts{})
	qc, _ := p.leaf(t, leafOpts{extra: []pkix.Extension{qcExtension(t)}})
	if got, err := HasQCStatements(qc); !got || err != nil {
		t.Errorf("qualified: %v, %v", got, err)
	}
	if got, err := HasQCStatements(plain); got || err != nil {
		t.Errorf("plain: %v, %v", got, err)
	}
	for _, bad := range []string{"", "not a pem", strings.Replace(plain, "CERTIFICATE", "PUBLIC KEY", 2)} {
		if _, err := HasQCStatements(bad); !errors.Is(err, ErrMalformedPEM) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseCertificatePEM(t *testing.T) {
	p := newTestPKI(t)
	good, _ := p.leaf(t, leafOpts{})
	body := strings.TrimPrefix(good, "-----BEGIN CERTIFICATE-----\n")
	accept := map[string]string{
		"as encoded":         good,
		"surrounding spaces": "\n  " + good + "\n\n",
		"no final newline":   strings.TrimSuffix(good, "\n"),
	}
	for name, text := range accept {
		if _, err := ParseCertificatePEM(text); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	refuse := map[string]string{
		"empty":            "",
		"leading text":     "hello\n" + good,
		"two certificates": good + good,
		"trailing text":    good + "trailer",
		"headers":          "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\n" + body,
		"bad DER":          "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"truncated":        good[:len(good)/2],
		"oversized":        good + strings.Repeat(" ", MaxPEMBytes),
		"other block":      "-----BEGIN CERTIFICATE-----\n" + body[:0] + "-----END CERTIFICATE-----\n",
	}
	for name, text := range refuse {
		if _, err := ParseCertificatePEM(text); !errors.Is(err, ErrMalformedPEM) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestTrustLevelText(t *testing.T) {
	for _, l := range []TrustLevel{L1, L2, L3} {
		text, err := l.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back TrustLevel
		if err := back.UnmarshalText(text); err != nil || back != l {
			t.Errorf("%v: round trip %v, %v", l, back, err)
		}
	}
	if _, err := TrustLevel(0).MarshalText(); !errors.Is(err, ErrInvalidTrustLevel) {
		t.Errorf("zero level marshals: %v", err)
	}
	for _, s := range []string{"", "l1", "L4", "L0", "2"} {
		if _, err := ParseTrustLevel(s); !errors.Is(err, ErrInvalidTrustLevel) {
			t.Errorf("%q parses", s)
		}
	}
	if got := TrustLevel(7).String(); got != "TrustLevel(7)" {
		t.Errorf("String %q", got)
	}
	if !(L1 < L2 && L2 < L3) {
		t.Error("levels do not order")
	}
}
