package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrTampered is matched (errors.Is) by every *Problem.
var ErrTampered = errors.New("audit: chain does not verify")

// ProblemKind classifies what Verify found.
type ProblemKind string

// The problems Verify names.
const (
	// ProblemAltered: a record's content does not match its hash, or it
	// does not parse, or its hash is not the one the next record links to
	// (it was changed and rehashed, or replaced), or a redacted record
	// still carries content.
	ProblemAltered ProblemKind = "altered"
	// ProblemRemoved: one or more seqs are missing (Seq is the first
	// missing one, Count how many), or the chain is shorter than an anchor
	// says, or it ends with a redacted record (the purge record that
	// always follows a redaction is gone).
	ProblemRemoved ProblemKind = "removed"
	// ProblemReordered: a record appears after a record with a higher
	// seq.
	ProblemReordered ProblemKind = "reordered"
	// ProblemInserted: a record that is not part of the chain sits in it:
	// two records claim the same seq, and the next one links past it.
	ProblemInserted ProblemKind = "inserted"
	// ProblemConflictingApproval: two approval records name one approval
	// request with different resolutions. The first decision wins, so
	// this never happens in a log the gateway wrote: a record was forged
	// or the authority broke its promise.
	ProblemConflictingApproval ProblemKind = "conflicting_approval"
	// ProblemCheckpoint: a checkpoint record is malformed, does not name
	// the record before it, or its signature does not verify with the
	// keys given (VerifyOptions.Checkpoints).
	ProblemCheckpoint ProblemKind = "bad_checkpoint"
)

// Problem is the first inconsistency Verify met.
type Problem struct {
	// Kind is what is wrong.
	Kind ProblemKind `json:"kind"`
	// Seq is the seq of the record concerned: the altered, reordered or
	// inserted one, or the first missing one.
	Seq uint64 `json:"seq"`
	// Count is how many seqs are missing (ProblemRemoved; 0 when unknown,
	// as for a truncated tail).
	Count uint64 `json:"count,omitempty"`
	// Position is the 1-based position, in storage order, of the record at
	// which the problem was noticed.
	Position int `json:"position"`
	// Detail explains the finding.
	Detail string `json:"detail"`
}

func (p *Problem) Error() string {
	return fmt.Sprintf("audit: chain does not verify: record %d %s: %s", p.Seq, p.Kind, p.Detail)
}

// Is makes errors.Is(p, ErrTampered) true.
func (p *Problem) Is(target error) bool { return target == ErrTampered }

// Anchor is a (seq, hash) pair saved outside the log, for instance from an
// earlier Report. A chain that no longer holds the anchored record with
// that hash has been truncated or rewritten, which the chain alone cannot
// show for its last records.
type Anchor struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// VerifyOptions tunes Verify. The zero value checks the chain alone.
type VerifyOptions struct {
	// Anchors must each match the record at their seq.
	Anchors []Anchor
	// Partial accepts a chain that starts after seq 1 and may end anywhere
	// (an Export with from > 1 or to set): the first record's seq and prev
	// are taken as given, and a redacted last record (whose hash only the
	// next record could vouch for) is accepted.
	Partial bool
	// Checkpoints, when set, checks the signature of every checkpoint
	// record (Log.Checkpoint); without it they are counted as unchecked.
	Checkpoints CheckpointVerifier
}

// Report is the result of a verification.
type Report struct {
	// Records is how many records were read.
	Records int `json:"records"`
	// Redacted is how many of them are redacted.
	Redacted int `json:"redacted"`
	// FirstSeq and LastSeq are the seqs of the first and last records read
	// (0 for an empty chain).
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Head is the hash of the last record read; save (LastSeq, Head) as an
	// Anchor to detect a later truncation.
	Head string `json:"head,omitempty"`
	// RepeatedApprovals counts approval records that repeat an earlier one
	// of the same approval request and resolution: written again by a
	// gateway that stopped between recording an approval and acting on it,
	// or a refusal recorded by each replica that learnt of it at once; one
	// resolution recorded twice, not a second one.
	RepeatedApprovals int `json:"repeated_approvals,omitempty"`
	// Checkpoints is how many checkpoint records carry a signature that
	// verified (VerifyOptions.Checkpoints), SignedThrough the seq the last
	// of them names and CheckpointTime when it was signed: every record up
	// to SignedThrough is vouched for by the signer. UncheckedCheckpoints
	// counts those whose signature was not checked (no verifier given).
	Checkpoints          int    `json:"checkpoints,omitempty"`
	SignedThrough        uint64 `json:"signed_through,omitempty"`
	CheckpointTime       string `json:"checkpoint_time,omitempty"`
	UncheckedCheckpoints int    `json:"unchecked_checkpoints,omitempty"`
	// Problem is the first problem found; nil when the chain verifies.
	Problem *Problem `json:"problem,omitempty"`
}

// OK reports whether the chain verified.
func (r Report) OK() bool { return r.Problem == nil }

// Err returns the Problem as an error, or nil when the chain verified.
func (r Report) Err() error {
	if r.Problem == nil {
		return nil
	}
	return r.Problem
}

// Anchor returns (LastSeq, Head).
func (r Report) Anchor() Anchor { return Anchor{Seq: r.LastSeq, Hash: r.Head} }

// Verifier checks a chain fed to it record by record, in storage order;
// Log.Verify and VerifyJSONL use it. It keeps O(1) state besides the
// anchors and one entry per approval request.
type Verifier struct {
	rep     Report
	anchors map[uint64]string
	seen    map[uint64]bool
	ckv     CheckpointVerifier

	expect       uint64 // the seq the next record should have
	prevHash     string // hash of the previous record (Genesis at first)
	prevSeq      uint64
	prevRedacted bool
	ppHash       string // hash of the record before the previous one
	// A pending removal [missLo, missHi) becomes a reordering if a record
	// in that range turns up later.
	missLo, missHi uint64
	lastRedacted   bool
	partial        bool
	// approvals maps each approval request id seen in an approval record
	// to its resolution id.
	approvals map[string]string
}

// NewVerifier returns a Verifier for a chain that starts at seq 1.
func NewVerifier(o VerifyOptions) *Verifier {
	v := &Verifier{expect: 1, prevHash: Genesis, partial: o.Partial, ckv: o.Checkpoints}
	if len(o.Anchors) > 0 {
		v.anchors = make(map[uint64]string, len(o.Anchors))
		v.seen = make(map[uint64]bool, len(o.Anchors))
		for _, a := range o.Anchors {
			v.anchors[a.Seq] = a.Hash
		}
	}
	return v
}

func (v *Verifier) fail(kind ProblemKind, seq, count uint64, format string, args ...any) {
	if v.rep.Problem != nil {
		return
	}
	v.rep.Problem = &Problem{Kind: kind, Seq: seq, Count: count, Position: v.rep.Records,
		Detail: fmt.Sprintf(format, args...)}
}

// Add feeds the next stored record: key is its storage key (used only to
// name a record that does not parse), data its JSON.
func (v *Verifier) Add(key uint64, data []byte) {
	v.rep.Records++
	rec, err := ParseRecord(data)
	if err != nil {
		v.fail(ProblemAltered, key, 0, "stored record does not parse: %v", err)
		v.prevHash, v.ppHash, v.prevSeq, v.expect = "", v.prevHash, key, key+1
		v.lastRedacted = false
		v.rep.LastSeq, v.rep.Head = key, ""
		return
	}
	if v.rep.Records == 1 {
		v.rep.FirstSeq = rec.Seq
		if v.partial && rec.Seq >= 1 {
			v.expect, v.prevHash = rec.Seq, rec.Prev
		}
	}
	if rec.Redacted {
		v.rep.Redacted++
	}
	if h, ok := v.anchors[rec.Seq]; ok {
		v.seen[rec.Seq] = true
		if rec.Hash != h {
			v.fail(ProblemAltered, rec.Seq, 0, "hash %s differs from the anchored %s", rec.Hash, h)
		}
	}
	v.check(&rec)
	v.approval(&rec)
	v.checkpoint(&rec)
	v.ppHash, v.prevHash, v.prevSeq, v.prevRedacted = v.prevHash, rec.Hash, rec.Seq, rec.Redacted
	v.expect = max(v.expect, rec.Seq+1)
	v.lastRedacted = rec.Redacted
	v.rep.LastSeq, v.rep.Head = rec.Seq, rec.Hash
}

func (v *Verifier) check(rec *Record) {
	if p := v.rep.Problem; p != nil {
		// Only refine a removal that turns out to be a reordering.
		if p.Kind == ProblemRemoved && rec.Seq >= v.missLo && rec.Seq < v.missHi {
			p.Kind, p.Seq, p.Count = ProblemReordered, rec.Seq, 0
			p.Position = v.rep.Records
			p.Detail = fmt.Sprintf("record %d is stored after record %d", rec.Seq, v.missHi)
		}
		return
	}
	if rec.Seq < 1 || rec.Seq > maxSeq || !isDigest(rec.Hash) || !isDigest(rec.Prev) || rec.Kind == "" {
		v.fail(ProblemAltered, rec.Seq, 0, "malformed record: seq, kind, prev or hash is invalid")
		return
	}
	if rec.Redacted {
		if rec.hasContent() {
			v.fail(ProblemAltered, rec.Seq, 0, "a redacted record carries content, which its hash cannot vouch for")
			return
		}
	} else if h, err := rec.ComputeHash(); err != nil || h != rec.Hash {
		v.fail(ProblemAltered, rec.Seq, 0, "content does not match its hash %s", rec.Hash)
		return
	}
	switch {
	case rec.Seq == v.expect:
		if rec.Prev == v.prevHash {
			return
		}
		if rec.Seq == 1 {
			v.fail(ProblemAltered, 1, 0, "the first record's prev is %s, not the genesis value", rec.Prev)
			return
		}
		what := "record"
		if v.prevRedacted {
			what = "redacted record"
		}
		v.fail(ProblemAltered, v.prevSeq, 0,
			"%s %d has hash %s but record %d links to %s: record %d was altered and rehashed, or replaced",
			what, v.prevSeq, v.prevHash, rec.Seq, rec.Prev, v.prevSeq)
	case rec.Seq > v.expect:
		v.missLo, v.missHi = v.expect, rec.Seq
		n := rec.Seq - v.expect
		what := fmt.Sprintf("records %d to %d are", v.expect, rec.Seq-1)
		if n == 1 {
			what = fmt.Sprintf("record %d is", v.expect)
		}
		after := fmt.Sprintf("record %d follows record %d", rec.Seq, v.expect-1)
		if v.expect == 1 {
			after = fmt.Sprintf("the chain starts at record %d", rec.Seq)
		}
		v.fail(ProblemRemoved, v.expect, n, "%s missing: %s", what, after)
	default: // rec.Seq < v.expect
		switch {
		case rec.Seq == v.prevSeq && rec.Prev == v.ppHash:
			v.fail(ProblemInserted, v.prevSeq, 0,
				"two records claim seq %d; the second one links to record %d, so the first is not part of the chain",
				rec.Seq, rec.Seq-1)
		case rec.Seq == v.prevSeq:
			v.fail(ProblemInserted, rec.Seq, 0, "two records claim seq %d", rec.Seq)
		default:
			v.fail(ProblemReordered, rec.Seq, 0, "record %d is stored after record %d", rec.Seq, v.prevSeq)
		}
	}
}

// checkpoint checks a checkpoint record: well formed, naming the record
// before it (whose hash the chain check tied to this record's prev), and
// signed, when a verifier is given.
func (v *Verifier) checkpoint(rec *Record) {
	if rec.Kind != KindCheckpoint || rec.Redacted || v.rep.Problem != nil {
		return
	}
	c, err := CheckpointOf(rec)
	switch {
	case err != nil:
		v.fail(ProblemCheckpoint, rec.Seq, 0, "%v", err)
		return
	case c.Seq+1 != rec.Seq || c.Hash != rec.Prev:
		v.fail(ProblemCheckpoint, rec.Seq, 0, "the checkpoint names record %d (%s), not the record before it", c.Seq, c.Hash)
		return
	case v.ckv == nil:
		v.rep.UncheckedCheckpoints++
		return
	}
	if err := v.ckv.VerifyCheckpoint(c.KID, c.Statement(), c.Signature); err != nil {
		v.fail(ProblemCheckpoint, rec.Seq, 0, "the checkpoint's signature (kid %q) does not verify: %v", c.KID, err)
		return
	}
	v.rep.Checkpoints++
	v.rep.SignedThrough, v.rep.CheckpointTime = c.Seq, FormatTime(c.Time)
}

// approval tells a repeated approval record (same request, same
// resolution) from a conflicting one (same request, another resolution).
func (v *Verifier) approval(rec *Record) {
	if rec.Kind != KindApproval || rec.Redacted || rec.RequestID == "" {
		return
	}
	if v.approvals == nil {
		v.approvals = map[string]string{}
	}
	prev, ok := v.approvals[rec.RequestID]
	switch {
	case !ok:
		v.approvals[rec.RequestID] = rec.ResolutionID
	case prev == rec.ResolutionID:
		v.rep.RepeatedApprovals++
	default:
		v.fail(ProblemConflictingApproval, rec.Seq, 0, "approval request %s has resolution %s here and %s in an earlier record",
			rec.RequestID, rec.ResolutionID, prev)
	}
}

// Report returns the result so far; call it after the last Add.
func (v *Verifier) Report() Report {
	rep := v.rep
	if rep.Problem != nil {
		p := *rep.Problem
		rep.Problem = &p
		return rep
	}
	fail := func(kind ProblemKind, seq, count uint64, format string, args ...any) {
		rep.Problem = &Problem{Kind: kind, Seq: seq, Count: count, Position: rep.Records, Detail: fmt.Sprintf(format, args...)}
	}
	if v.lastRedacted && !v.partial {
		fail(ProblemRemoved, rep.LastSeq+1, 0,
			"the chain ends with redacted record %d: the purge record written after every redaction is missing", rep.LastSeq)
		return rep
	}
	var missing uint64
	for seq := range v.anchors {
		if !v.seen[seq] && (missing == 0 || seq < missing) {
			missing = seq
		}
	}
	if missing != 0 {
		fail(ProblemRemoved, missing, 0, "anchored record %d is not in the chain (it ends at seq %d)", missing, rep.LastSeq)
	}
	return rep
}

// VerifyJSONL verifies a chain read from r in the Export format (one
// record per line; empty lines are skipped). The error is for read
// failures; chain problems are in the Report.
func VerifyJSONL(r io.Reader, o VerifyOptions) (Report, error) {
	v := NewVerifier(o)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxRecordSize+2)
	var key uint64
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		key++
		v.Add(key, bytes.Clone(line))
		key = max(key, v.rep.LastSeq)
	}
	if err := sc.Err(); err != nil {
		return v.Report(), fmt.Errorf("audit: verify: %w", err)
	}
	return v.Report(), nil
}

// ReadJSONL calls fn with every record read from r in the Export format,
// parsed (not verified).
func ReadJSONL(r io.Reader, fn func(Record) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxRecordSize+2)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		rec, err := ParseRecord(b)
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return sc.Err()
}
