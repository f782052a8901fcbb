package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// BundleType is the "type" of a bundle's manifest.
const BundleType = "custos.audit.bundle/v1"

// MaxManifestSize caps a bundle's first line (the manifest with the JWKS).
const MaxManifestSize = 1 << 20

// A bundle is what a third party needs to verify the chain offline: JSON
// lines, the first a Manifest (with the signer's public keys, a JWK
// Set), then every record of the chain from seq 1, as Export writes them.
// The manifest is not signed: what vouches for the records is the chain
// and its signed checkpoints; the manifest's counts and head make a bundle
// cut or padded after export fail verification unless the manifest is
// rewritten too (see docs/audit.md for what that leaves open).

// Manifest is a bundle's first line.
type Manifest struct {
	Type string `json:"type"`
	// ExportedAt is when the bundle was written; the tail is judged at
	// that time (VerifyOptions.Now).
	ExportedAt string `json:"exported_at"`
	// Records, Redacted and Checkpoints count the bundle's records;
	// LastSeq and Head are its last record's.
	Records     int    `json:"records"`
	Redacted    int    `json:"redacted"`
	Checkpoints int    `json:"checkpoints"`
	LastSeq     uint64 `json:"last_seq"`
	Head        string `json:"head,omitempty"`
	// SignedThrough is the seq the last checkpoint names.
	SignedThrough uint64 `json:"signed_through,omitempty"`
	// JWKS is the JWK Set the checkpoints verify with (public keys).
	JWKS json.RawMessage `json:"jwks"`
}

// ExportBundle verifies the whole chain with o (o.Checkpoints must be
// set: the keys jwks holds) and writes it to w as a bundle. It refuses a
// chain that does not verify, and writes records up to the last one the
// verification read (later appends are left out).
func (l *Log) ExportBundle(ctx context.Context, w io.Writer, jwks []byte, o VerifyOptions) (Manifest, Report, error) {
	if o.Checkpoints == nil {
		return Manifest{}, Report{}, errors.New("audit: bundle: the checkpoint keys are required")
	}
	if !json.Valid(jwks) || len(bytes.TrimSpace(jwks)) == 0 {
		return Manifest{}, Report{}, errors.New("audit: bundle: the JWKS is not JSON")
	}
	at := l.opts.Now().UTC().Round(0)
	if o.Now.IsZero() {
		o.Now = at
	}
	rep, err := l.VerifyWith(ctx, o)
	if err != nil {
		return Manifest{}, rep, err
	}
	if p := rep.Problem; p != nil {
		return Manifest{}, rep, fmt.Errorf("audit: bundle: the chain does not verify, nothing exported: %w", p)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, jwks); err != nil {
		return Manifest{}, rep, err
	}
	m := Manifest{Type: BundleType, ExportedAt: FormatTime(at), Records: rep.Records, Redacted: rep.Redacted,
		Checkpoints: rep.Checkpoints, LastSeq: rep.LastSeq, Head: rep.Head, SignedThrough: rep.SignedThrough, JWKS: compact.Bytes()}
	line, err := json.Marshal(m)
	if err != nil {
		return m, rep, err
	}
	if len(line) > MaxManifestSize {
		return m, rep, fmt.Errorf("audit: bundle: the manifest is larger than %d bytes (the JWKS is too large)", MaxManifestSize)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		return m, rep, err
	}
	if rep.Records == 0 {
		return m, rep, nil
	}
	n, err := l.Export(ctx, w, 1, rep.LastSeq)
	if err != nil {
		return m, rep, err
	}
	if n != rep.Records {
		return m, rep, fmt.Errorf("audit: bundle: %d records verified but %d exported: the log changed under the export (a purge?); export again", rep.Records, n)
	}
	return m, rep, nil
}

// ErrBundle is wrapped by the errors of a bundle that cannot be read (not
// a chain problem: those are in the Report).
var ErrBundle = errors.New("audit: not a valid bundle")

// VerifyBundle verifies a bundle read from r: its manifest, every record
// (from seq 1), every checkpoint's signature with the bundle's JWKS (keys
// turns it into a verifier; o.Checkpoints, when set, is used instead:
// keys the verifier got from the gateway itself), and that the records
// are those the manifest counts, ending with the head it names. The tail
// is judged at the manifest's ExportedAt. Chain problems, and a bundle
// whose records do not match its manifest, are in the Report; the error
// is for a bundle that cannot be read.
func VerifyBundle(r io.Reader, keys func(jwks []byte) (CheckpointVerifier, error), o VerifyOptions) (Manifest, Report, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	m, err := readManifest(br)
	if err != nil {
		return m, Report{}, err
	}
	if o.Checkpoints == nil {
		ckv, err := keys(m.JWKS)
		if err != nil {
			return m, Report{}, fmt.Errorf("%w: its JWKS: %w", ErrBundle, err)
		}
		o.Checkpoints = ckv
	}
	o.Partial = false
	o.Now, _ = parseTime(m.ExportedAt)
	rep, err := VerifyJSONL(br, o)
	if err != nil {
		return m, rep, err
	}
	if rep.Problem != nil {
		return m, rep, nil
	}
	fail := func(kind ProblemKind, seq uint64, format string, args ...any) {
		rep.Problem = &Problem{Kind: kind, Seq: seq, Position: rep.Records, Detail: fmt.Sprintf(format, args...)}
		rep.Tail = nil
	}
	switch {
	case rep.LastSeq < m.LastSeq:
		fail(ProblemTruncated, rep.LastSeq+1, "the bundle's records end at record %d, but its manifest says they end at record %d (%s): records were removed from the bundle",
			rep.LastSeq, m.LastSeq, m.Head)
	case rep.LastSeq > m.LastSeq:
		fail(ProblemInserted, m.LastSeq+1, "the bundle holds records after record %d, the last its manifest names", m.LastSeq)
	case rep.Head != m.Head:
		fail(ProblemAltered, rep.LastSeq, "the bundle's last record has hash %s, but its manifest names %s", rep.Head, m.Head)
	case rep.Records != m.Records:
		fail(ProblemRemoved, rep.LastSeq, "the bundle holds %d records, its manifest counts %d", rep.Records, m.Records)
	case rep.Checkpoints != m.Checkpoints || rep.SignedThrough != m.SignedThrough:
		fail(ProblemCheckpoint, rep.LastSeq, "the bundle holds %d signed checkpoints (the last naming record %d), its manifest counts %d (the last naming record %d)",
			rep.Checkpoints, rep.SignedThrough, m.Checkpoints, m.SignedThrough)
	case rep.Redacted != m.Redacted:
		fail(ProblemAltered, rep.LastSeq, "the bundle holds %d redacted records, its manifest counts %d", rep.Redacted, m.Redacted)
	}
	return m, rep, nil
}

// readManifest reads and checks a bundle's first line.
func readManifest(br *bufio.Reader) (Manifest, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxManifestSize+1 {
			return Manifest{}, fmt.Errorf("%w: its first line (the manifest) is larger than %d bytes", ErrBundle, MaxManifestSize)
		}
		if err == nil || errors.Is(err, io.EOF) {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return Manifest{}, fmt.Errorf("%w: reading its manifest: %w", ErrBundle, err)
		}
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Manifest{}, fmt.Errorf("%w: empty (no manifest)", ErrBundle)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: its first line is not a manifest: %v", ErrBundle, err)
	}
	if dec.More() {
		return Manifest{}, fmt.Errorf("%w: its first line holds more than the manifest", ErrBundle)
	}
	t, err := parseTime(m.ExportedAt)
	switch {
	case m.Type != BundleType:
		return m, fmt.Errorf("%w: manifest type %q, want %q", ErrBundle, m.Type, BundleType)
	case err != nil || FormatTime(t) != m.ExportedAt:
		return m, fmt.Errorf("%w: manifest exported_at %q is not a time as %s", ErrBundle, m.ExportedAt, TimeLayout)
	case m.Records < 0 || m.Redacted < 0 || m.Checkpoints < 0 || m.Redacted > m.Records || m.Checkpoints > m.Records ||
		uint64(m.Records) != m.LastSeq || m.LastSeq > maxSeq || m.SignedThrough >= max(m.LastSeq, 1):
		return m, fmt.Errorf("%w: the manifest's counts do not add up (records %d, redacted %d, checkpoints %d, last seq %d, signed through %d)",
			ErrBundle, m.Records, m.Redacted, m.Checkpoints, m.LastSeq, m.SignedThrough)
	case m.Records > 0 && !isDigest(m.Head), m.Records == 0 && m.Head != "":
		return m, fmt.Errorf("%w: the manifest's head %q is not the hash of its last record", ErrBundle, m.Head)
	case len(bytes.TrimSpace(m.JWKS)) == 0 || bytes.Equal(bytes.TrimSpace(m.JWKS), []byte("null")):
		return m, fmt.Errorf("%w: the manifest has no JWKS", ErrBundle)
	}
	return m, nil
}
