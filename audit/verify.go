package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
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
	// ProblemTruncated: records were removed from the end of the chain,
	// proven by a checkpoint known from outside it (VerifyOptions.Heads:
	// the gateway's head file, a bundle's manifest) that names a record
	// beyond the chain's end.
	ProblemTruncated ProblemKind = "truncated"
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
	// Heads are checkpoint records known from outside the chain (HeadOf):
	// each must be in it, with its hash. One beyond the chain's end is
	// ProblemTruncated.
	Heads []Head
	// Now, when set, is the time the tail is judged at (Report.Tail): a
	// record left without the checkpoint its writer promised by then is
	// a suspected truncation or crash (TailOverdue).
	Now time.Time
}

// Head is a checkpoint record known from outside the chain.
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	// Time is when the checkpoint was signed.
	Time string `json:"time"`
	// Source names where it came from ("head file /var/lib/…").
	Source string `json:"source"`
}

// HeadOf checks that rec, found outside the chain in source, is a sealed
// checkpoint record (its hash matches its content) whose signature
// verifies with ckv (when ckv is set), and returns it as a Head.
func HeadOf(rec Record, source string, ckv CheckpointVerifier) (Head, error) {
	if rec.Kind != KindCheckpoint || rec.Redacted || rec.Seq < 1 {
		return Head{}, fmt.Errorf("%s: not a checkpoint record", source)
	}
	if h, err := rec.ComputeHash(); err != nil || h != rec.Hash {
		return Head{}, fmt.Errorf("%s: the checkpoint record's content does not match its hash", source)
	}
	c, err := CheckpointOf(&rec)
	if err != nil {
		return Head{}, fmt.Errorf("%s: %w", source, err)
	}
	if c.Seq+1 != rec.Seq || c.Hash != rec.Prev {
		return Head{}, fmt.Errorf("%s: the checkpoint does not name the record before it", source)
	}
	if ckv != nil {
		if err := ckv.VerifyCheckpoint(c.KID, c.Statement(), c.Signature); err != nil {
			return Head{}, fmt.Errorf("%s: the checkpoint's signature (kid %q) does not verify: %w", source, c.KID, err)
		}
	}
	return Head{Seq: rec.Seq, Hash: rec.Hash, Time: FormatTime(c.Time), Source: source}, nil
}

// CheckpointGrace is how late a promised checkpoint may be (a slow
// signer, a busy lock, clocks apart) before the tail is TailOverdue.
const CheckpointGrace = 2 * time.Minute

// TailStatus says how the chain ends (Report.Tail).
type TailStatus string

// How a chain may end.
const (
	// TailEmpty: no records.
	TailEmpty TailStatus = "empty"
	// TailCleanStop: with a stop checkpoint: its writer stopped cleanly.
	TailCleanStop TailStatus = "clean_stop"
	// TailCheckpointed: with another checkpoint: the writer may be
	// running (a quiet chain gets no new checkpoint), or it stopped
	// without a clean stop, or records after this checkpoint were
	// removed with every later checkpoint. The chain cannot tell.
	TailCheckpointed TailStatus = "checkpointed"
	// TailPending: with records after the last checkpoint, within the
	// time its writer promised to checkpoint them (or no time to judge
	// by: VerifyOptions.Now unset).
	TailPending TailStatus = "pending"
	// TailUnvouched: with records after the last checkpoint, and no
	// promise to checkpoint them (no checkpoint at all, or the last is a
	// stop, or carries no promise).
	TailUnvouched TailStatus = "unvouched"
	// TailOverdue: with records after the last checkpoint older than its
	// writer's promise allows: the writer crashed before it could sign the
	// next checkpoint, or records were removed after a signed checkpoint
	// (with the checkpoints that followed). A suspicion, not a proof.
	TailOverdue TailStatus = "overdue"
)

// Tail is what the verifier can say about the end of the chain.
type Tail struct {
	Status TailStatus `json:"status"`
	// LastCheckpoint is the seq of the last checkpoint record (0: none),
	// Event its event ("" for a v1 checkpoint), Time when it was signed.
	LastCheckpoint uint64 `json:"last_checkpoint,omitempty"`
	Event          string `json:"event,omitempty"`
	Time           string `json:"time,omitempty"`
	// After is how many records follow it.
	After int `json:"after"`
	// Every is the promise in force after it, in seconds (0: none).
	Every int64 `json:"every,omitempty"`
	// Due is when the checkpoint of the first record after it was due
	// (set with a promise and records after it).
	Due string `json:"due,omitempty"`
	// UncleanStarts counts start checkpoints that found no clean stop
	// before them: a writer that crashed or was killed, or (on a shared
	// chain) another replica that was running.
	UncleanStarts int `json:"unclean_starts,omitempty"`
	// Detail says it in words.
	Detail string `json:"detail"`
}

// Suspect reports whether the tail suggests a truncation or a crash.
func (t *Tail) Suspect() bool { return t != nil && t.Status == TailOverdue }

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
	// Tail says how the chain ends; set when it verifies.
	Tail *Tail `json:"tail,omitempty"`
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

	heads         map[uint64]Head
	seenHeads     map[uint64]bool
	now           time.Time
	prevStop      bool // the previous record is a stop checkpoint
	tail          Tail
	promise       time.Duration
	firstAfter    time.Time // time of the first record after the last checkpoint
	lastCPTime    time.Time
	anyCheckpoint bool
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
	if len(o.Heads) > 0 {
		v.heads = make(map[uint64]Head, len(o.Heads))
		v.seenHeads = make(map[uint64]bool, len(o.Heads))
		for _, h := range o.Heads {
			if old, ok := v.heads[h.Seq]; !ok || old.Hash == h.Hash {
				v.heads[h.Seq] = h
			} else {
				// Two outside checkpoints disagree: at least one record
				// at that seq is not the chain's; the chain's own check
				// then fails on one of them.
				v.heads[h.Seq] = Head{Seq: h.Seq, Hash: "conflicting", Time: h.Time, Source: old.Source + " and " + h.Source}
			}
		}
	}
	v.now = o.Now
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
	if h, ok := v.heads[rec.Seq]; ok {
		v.seenHeads[rec.Seq] = true
		if rec.Hash != h.Hash {
			v.fail(ProblemAltered, rec.Seq, 0, "hash %s differs from checkpoint record %d signed at %s in %s (%s): the chain was rewritten from there",
				rec.Hash, h.Seq, h.Time, h.Source, h.Hash)
		}
	}
	v.check(&rec)
	v.approval(&rec)
	v.checkpoint(&rec)
	v.trackTail(&rec)
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
	case c.Event == EventStart && (c.Found == FoundEmpty) != (c.Seq == 0),
		c.Event == EventStart && c.Seq > 0 && (c.Found == FoundCleanStop) != v.prevStop:
		v.fail(ProblemCheckpoint, rec.Seq, 0, "the start checkpoint says it found %s at the end of the chain, which record %d does not match", c.Found, c.Seq)
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

// trackTail follows what the tail analysis needs: the last checkpoint,
// its promise and the records after it.
func (v *Verifier) trackTail(rec *Record) {
	defer func() { v.prevStop = IsStop(rec) }()
	if rec.Kind != KindCheckpoint || rec.Redacted {
		if v.tail.After == 0 {
			v.firstAfter = rec.Time
		}
		v.tail.After++
		return
	}
	c, err := CheckpointOf(rec)
	if err != nil {
		return // reported by checkpoint
	}
	v.anyCheckpoint = true
	if c.Event == EventStart && c.Found == FoundNoCleanStop {
		v.tail.UncleanStarts++
	}
	v.tail.LastCheckpoint, v.tail.Event, v.tail.Time, v.tail.After = rec.Seq, c.Event, FormatTime(c.Time), 0
	v.lastCPTime = c.Time
	switch {
	case c.Every > 0:
		v.promise = c.Every
	case c.Event == EventStop:
		v.promise = 0
	}
	// A purge checkpoint from a tool (no promise) leaves the promise of
	// the gateway's last checkpoint in force.
}

// finishTail judges the end of the chain.
func (v *Verifier) finishTail(rep *Report) {
	t := v.tail
	t.Every = int64(v.promise / time.Second)
	unchecked := ""
	if v.ckv == nil && v.anyCheckpoint {
		unchecked = " (the checkpoints' signatures were not checked)"
	}
	switch {
	case rep.Records == 0:
		t.Status, t.Detail = TailEmpty, "the chain is empty"
	case t.After == 0 && t.Event == EventStop:
		t.Status = TailCleanStop
		t.Detail = fmt.Sprintf("the chain ends with a clean-stop checkpoint (record %d, signed %s)%s", t.LastCheckpoint, t.Time, unchecked)
	case t.After == 0:
		t.Status = TailCheckpointed
		t.Detail = fmt.Sprintf("the chain ends with a checkpoint (record %d, signed %s) but no clean stop: the gateway is running, "+
			"or it stopped without a clean stop, or records after that checkpoint were removed with the checkpoints that followed; "+
			"the chain cannot tell%s", t.LastCheckpoint, t.Time, unchecked)
	case !v.anyCheckpoint:
		t.Status = TailUnvouched
		t.Detail = "no checkpoint: nothing in the chain is signed, and records cut off its end cannot be detected without an anchor"
	case v.promise == 0:
		t.Status = TailUnvouched
		t.Detail = fmt.Sprintf("%d %s after the last checkpoint (record %d, %s), which promises no next one: they are not vouched for%s",
			t.After, plural(t.After, "record", "records"), t.LastCheckpoint, t.Event, unchecked)
	default:
		// A record after a checkpoint was appended after it was signed,
		// whatever time the record carries.
		first := v.firstAfter
		if first.Before(v.lastCPTime) {
			first = v.lastCPTime
		}
		due := first.Add(v.promise)
		t.Due = FormatTime(due)
		if !v.now.IsZero() && v.now.After(due.Add(CheckpointGrace)) {
			t.Status = TailOverdue
			t.Detail = fmt.Sprintf("%d %s after the last checkpoint (record %d, signed %s), the first at %s, and no checkpoint by %s although the gateway "+
				"signs one every %s: it stopped without a clean stop (a crash), or records were removed after a later signed checkpoint; "+
				"suspected, not proven%s", t.After, plural(t.After, "record", "records"), t.LastCheckpoint, t.Time, FormatTime(first), t.Due,
				v.promise, unchecked)
		} else {
			t.Status = TailPending
			t.Detail = fmt.Sprintf("%d %s after the last checkpoint (record %d, signed %s), to be checkpointed by %s%s",
				t.After, plural(t.After, "record", "records"), t.LastCheckpoint, t.Time, t.Due, unchecked)
		}
	}
	rep.Tail = &t
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
		return rep
	}
	var head *Head
	for seq, h := range v.heads {
		if !v.seenHeads[seq] && (head == nil || seq > head.Seq) {
			head = &h
		}
	}
	if head != nil {
		if head.Seq > rep.LastSeq {
			fail(ProblemTruncated, rep.LastSeq+1, head.Seq-rep.LastSeq,
				"the chain ends at record %d, but %s holds checkpoint record %d signed at %s: at least records %d to %d were removed after a signed checkpoint",
				rep.LastSeq, head.Source, head.Seq, head.Time, rep.LastSeq+1, head.Seq)
		} else {
			fail(ProblemRemoved, head.Seq, 0, "checkpoint record %d signed at %s in %s is not in the chain", head.Seq, head.Time, head.Source)
		}
		return rep
	}
	v.finishTail(&rep)
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
