package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A checkpoint is a record of kind KindCheckpoint in the chain that
// carries a signed statement of the record before it: its seq and hash,
// and when the statement was made. The chain alone proves that its
// records form one unbroken sequence, not who wrote them: someone who can
// write the storage can rewrite it from some record on. A checkpoint
// signed with the gateway's key vouches for every record up to the one it
// names, so a rewrite of those records is detected without any anchor kept
// elsewhere, and a checkpoint copied out of the log (an export, a monitor
// that fetches the newest one) is an anchor nobody can forge: a chain
// truncated before it no longer holds it.
//
// The statement is the RFC 8785 form of
//
//	{"hash":"sha256:…","seq":N,"time":"2026-12-02T10:00:00.000000000Z","type":"custos.audit.checkpoint/v1"}
//
// and the record's details are {"checkpoint": {"seq", "hash", "time"},
// "kid": the key's id, "signature": what the signer returned for the
// statement}. How the statement is signed (the gateway's Ed25519 key,
// base64url without padding) is the signer's and verifier's business.

// CheckpointType is the statement's "type" of a checkpoint without an
// event (written before events were added; still verified).
const CheckpointType = "custos.audit.checkpoint/v1"

// CheckpointTypeV2 is the statement's "type" of a checkpoint with an
// event. Its statement is the RFC 8785 form of
//
//	{"event":"start","every":600,"found":"clean_stop","hash":"sha256:…","seq":N,"time":"…","type":"custos.audit.checkpoint/v2"}
//
// where "every" (the signer's promise, in seconds: every record it
// appends is followed by a checkpoint within that time while it runs) is
// left out when the signer makes no promise, and "found" is set on start
// checkpoints alone.
const CheckpointTypeV2 = "custos.audit.checkpoint/v2"

// Why a checkpoint was signed (Checkpoint.Event).
const (
	// EventInterval: the periodic checkpoint (and Log.Checkpoint's).
	EventInterval = "interval"
	// EventStart: the writer started; Found says how the chain ended.
	EventStart = "start"
	// EventStop: the writer stopped cleanly. It ends the writer's promise.
	EventStop = "stop"
	// EventPurge: right after a retention purge (Log.Purge with
	// Options.Signer).
	EventPurge = "purge"
)

// What a start checkpoint found at the end of the chain (Checkpoint.Found).
const (
	// FoundEmpty: nothing; the checkpoint names seq 0 and Genesis.
	FoundEmpty = "empty"
	// FoundCleanStop: a stop checkpoint: the previous writer stopped
	// cleanly.
	FoundCleanStop = "clean_stop"
	// FoundNoCleanStop: anything else: the previous writer stopped without
	// a stop checkpoint (it crashed or was killed), or another writer
	// (a replica) is still running.
	FoundNoCleanStop = "no_clean_stop"
)

// CheckpointSigner signs checkpoint statements.
type CheckpointSigner interface {
	// SignCheckpoint returns the id of the key and the signature of
	// statement.
	SignCheckpoint(statement []byte) (kid, signature string, err error)
}

// CheckpointVerifier checks the signatures of checkpoint statements.
type CheckpointVerifier interface {
	// VerifyCheckpoint reports whether signature is kid's signature of
	// statement (nil when it is).
	VerifyCheckpoint(kid string, statement []byte, signature string) error
}

// Checkpoint is what a checkpoint record vouches for.
type Checkpoint struct {
	// Seq and Hash are the record the checkpoint names (the one before
	// it in the chain; 0 and Genesis for a start checkpoint of an empty
	// chain). Seq is also how many records came before the checkpoint.
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	// Time is when the statement was signed.
	Time time.Time `json:"time"`
	// Event is why it was signed (EventStart, …); "" for a v1
	// checkpoint.
	Event string `json:"event,omitempty"`
	// Every is the signer's promise: while it runs, every record it
	// appends is followed by a checkpoint within Every. Zero: no promise
	// (a stop checkpoint, a command-line purge).
	Every time.Duration `json:"every,omitempty"`
	// Found is, on a start checkpoint, how the chain ended (FoundEmpty,
	// FoundCleanStop, FoundNoCleanStop).
	Found string `json:"found,omitempty"`
	// KID and Signature are the signer's.
	KID       string `json:"kid,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// Statement returns the bytes the checkpoint's signature covers.
func (c Checkpoint) Statement() []byte {
	// The members in RFC 8785 order; the hash is a digest, the time a
	// FormatTime and event and found are checked names, so none needs
	// escaping (checked by the caller).
	if c.Event == "" {
		return []byte(`{"hash":"` + c.Hash + `","seq":` + strconv.FormatUint(c.Seq, 10) +
			`,"time":"` + FormatTime(c.Time) + `","type":"` + CheckpointType + `"}`)
	}
	s := `{"event":"` + c.Event + `"`
	if c.Every > 0 {
		s += `,"every":` + strconv.FormatInt(int64(c.Every/time.Second), 10)
	}
	if c.Found != "" {
		s += `,"found":"` + c.Found + `"`
	}
	return []byte(s + `,"hash":"` + c.Hash + `","seq":` + strconv.FormatUint(c.Seq, 10) +
		`,"time":"` + FormatTime(c.Time) + `","type":"` + CheckpointTypeV2 + `"}`)
}

// IsStop reports whether rec is a stop checkpoint (not checked).
func IsStop(rec *Record) bool {
	if rec == nil || rec.Kind != KindCheckpoint || rec.Redacted {
		return false
	}
	c, _ := rec.Details["checkpoint"].(map[string]any)
	return c["event"] == EventStop
}

// errNothingToCheckpoint: the chain is empty or ends with a checkpoint.
var errNothingToCheckpoint = errors.New("nothing new to checkpoint")

// Checkpoint appends an interval checkpoint record signed by s for the
// record at the end of the chain, and returns it with true; when the
// chain is empty or already ends with a checkpoint it writes nothing and
// returns false. The checkpoint carries Options.CheckpointEvery as its
// promise.
func (l *Log) Checkpoint(ctx context.Context, s CheckpointSigner) (Record, bool, error) {
	return l.CheckpointEvent(ctx, s, EventInterval)
}

// CheckpointEvent appends a checkpoint for event, signed by s, as
// Checkpoint does, with these differences: EventStart and EventStop are
// always written, even after another checkpoint (they record an event) and
// on an empty chain (naming seq 0 and Genesis); a start checkpoint says
// what it found at the end of the chain (Found); a stop checkpoint makes
// no promise (Every 0). EventPurge is written after any record but a
// checkpoint.
func (l *Log) CheckpointEvent(ctx context.Context, s CheckpointSigner, event string) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, fmt.Errorf("%w: %w", ErrAppend, err)
	}
	switch event {
	case EventInterval, EventStart, EventStop, EventPurge:
	default:
		return Record{}, false, fmt.Errorf("%w: checkpoint: unknown event %q", ErrAppend, event)
	}
	always := event == EventStart || event == EventStop
	now := l.opts.Now().UTC().Round(0)
	rec, err := l.b.Append(ctx, func(last *Record) (Record, error) {
		if !always && (last == nil || last.Kind == KindCheckpoint) {
			return Record{}, errNothingToCheckpoint
		}
		c := Checkpoint{Seq: 0, Hash: Genesis, Time: now, Event: event}
		if last != nil {
			if !isDigest(last.Hash) {
				return Record{}, fmt.Errorf("the last record (seq %d) has no valid hash", last.Seq)
			}
			c.Seq, c.Hash = last.Seq, last.Hash
		}
		if event != EventStop {
			c.Every = l.opts.CheckpointEvery.Truncate(time.Second)
		}
		if event == EventStart {
			switch {
			case last == nil:
				c.Found = FoundEmpty
			case IsStop(last):
				c.Found = FoundCleanStop
			default:
				c.Found = FoundNoCleanStop
			}
		}
		kid, signature, err := s.SignCheckpoint(c.Statement())
		if err != nil {
			return Record{}, err
		}
		stmt := map[string]any{"seq": c.Seq, "hash": c.Hash, "time": FormatTime(c.Time), "event": c.Event}
		if c.Every > 0 {
			stmt["every"] = int64(c.Every / time.Second)
		}
		if c.Found != "" {
			stmt["found"] = c.Found
		}
		rec := Record{Kind: KindCheckpoint, Time: now, Actor: Actor{ID: "custos.audit", Type: ActorPolicy},
			Details: map[string]any{"checkpoint": stmt, "kid": kid, "signature": signature}}
		// Checkpoints are kept for as long as the chain: no retention.
		sealed, err := l.sealOnce(rec, last, false)
		return sealed.Record, err
	})
	if errors.Is(err, errNothingToCheckpoint) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("%w: checkpoint: %w", ErrAppend, err)
	}
	if l.opts.OnCheckpoint != nil {
		l.opts.OnCheckpoint(rec)
	}
	return rec, true, nil
}

// CheckpointOf reads the checkpoint a record of kind KindCheckpoint
// carries.
func CheckpointOf(rec *Record) (Checkpoint, error) {
	if rec.Kind != KindCheckpoint {
		return Checkpoint{}, fmt.Errorf("a %s record is not a checkpoint", rec.Kind)
	}
	c, _ := rec.Details["checkpoint"].(map[string]any)
	kid, _ := rec.Details["kid"].(string)
	signature, _ := rec.Details["signature"].(string)
	hash, _ := c["hash"].(string)
	at, _ := c["time"].(string)
	seq, ok := uintOf(c["seq"])
	t, err := parseTime(at)
	switch {
	case c == nil:
		return Checkpoint{}, errors.New("no checkpoint in its details")
	case !ok || !isDigest(hash) || err != nil || FormatTime(t) != at:
		return Checkpoint{}, errors.New("a malformed checkpoint: seq, hash or time is invalid")
	case kid == "" || signature == "":
		return Checkpoint{}, errors.New("an unsigned checkpoint")
	}
	out := Checkpoint{Seq: seq, Hash: hash, Time: t, KID: kid, Signature: signature}
	ev, hasEvent := c["event"]
	if !hasEvent {
		if len(c) != 3 {
			return Checkpoint{}, errors.New("a malformed checkpoint: unknown members in a v1 checkpoint")
		}
		return out, nil
	}
	out.Event, _ = ev.(string)
	switch out.Event {
	case EventInterval, EventStart, EventStop, EventPurge:
	default:
		return Checkpoint{}, fmt.Errorf("a malformed checkpoint: unknown event %v", ev)
	}
	n := 4
	if v, ok := c["every"]; ok {
		secs, ok := uintOf(v)
		if !ok || secs == 0 || secs > maxEverySeconds || out.Event == EventStop {
			return Checkpoint{}, errors.New("a malformed checkpoint: every must be a positive number of seconds, and a stop checkpoint makes no promise")
		}
		out.Every = time.Duration(secs) * time.Second
		n++
	}
	if v, ok := c["found"]; ok {
		out.Found, _ = v.(string)
		switch {
		case out.Event != EventStart:
			return Checkpoint{}, errors.New("a malformed checkpoint: found is set on a start checkpoint alone")
		case out.Found != FoundEmpty && out.Found != FoundCleanStop && out.Found != FoundNoCleanStop:
			return Checkpoint{}, fmt.Errorf("a malformed checkpoint: unknown found %v", v)
		}
		n++
	} else if out.Event == EventStart {
		return Checkpoint{}, errors.New("a malformed checkpoint: a start checkpoint without found")
	}
	if len(c) != n {
		return Checkpoint{}, errors.New("a malformed checkpoint: unknown members")
	}
	if (seq == 0) != (hash == Genesis) || (seq == 0 && out.Event != EventStart && out.Event != EventStop) {
		return Checkpoint{}, errors.New("a malformed checkpoint: only a start or stop checkpoint may name the empty chain (seq 0, the genesis hash)")
	}
	return out, nil
}

// maxEverySeconds bounds a checkpoint's promise (a year).
const maxEverySeconds = 366 * 24 * 3600

// uintOf reads a non-negative integer decoded from JSON.
func uintOf(v any) (uint64, bool) {
	switch n := v.(type) {
	case json.Number:
		u, err := strconv.ParseUint(string(n), 10, 64)
		return u, err == nil && u <= maxSeq
	case float64:
		if n >= 0 && n <= maxSeq && n == float64(uint64(n)) {
			return uint64(n), true
		}
	case uint64:
		return n, true
	case int:
		if n >= 0 {
			return uint64(n), true
		}
	}
	return 0, false
}
