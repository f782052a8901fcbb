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

// CheckpointType is the statement's "type".
const CheckpointType = "custos.audit.checkpoint/v1"

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
	// it in the chain).
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	// Time is when the statement was signed.
	Time time.Time `json:"time"`
	// KID and Signature are the signer's.
	KID       string `json:"kid,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// Statement returns the bytes the checkpoint's signature covers.
func (c Checkpoint) Statement() []byte {
	// The members in RFC 8785 order; the hash is a digest and the time a
	// FormatTime, so none needs escaping (checked by the caller).
	return []byte(`{"hash":"` + c.Hash + `","seq":` + strconv.FormatUint(c.Seq, 10) +
		`,"time":"` + FormatTime(c.Time) + `","type":"` + CheckpointType + `"}`)
}

// errNothingToCheckpoint: the chain is empty or ends with a checkpoint.
var errNothingToCheckpoint = errors.New("nothing new to checkpoint")

// Checkpoint appends a checkpoint record signed by s for the record at the
// end of the chain, and returns it with true; when the chain is empty or
// already ends with a checkpoint it writes nothing and returns false.
func (l *Log) Checkpoint(ctx context.Context, s CheckpointSigner) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, fmt.Errorf("%w: %w", ErrAppend, err)
	}
	now := l.opts.Now().UTC().Round(0)
	rec, err := l.b.Append(ctx, func(last *Record) (Record, error) {
		if last == nil || last.Kind == KindCheckpoint {
			return Record{}, errNothingToCheckpoint
		}
		if !isDigest(last.Hash) {
			return Record{}, fmt.Errorf("the last record (seq %d) has no valid hash", last.Seq)
		}
		c := Checkpoint{Seq: last.Seq, Hash: last.Hash, Time: now}
		kid, signature, err := s.SignCheckpoint(c.Statement())
		if err != nil {
			return Record{}, err
		}
		rec := Record{Kind: KindCheckpoint, Time: now, Actor: Actor{ID: "custos.audit", Type: ActorPolicy},
			Details: map[string]any{
				"checkpoint": map[string]any{"seq": c.Seq, "hash": c.Hash, "time": FormatTime(c.Time)},
				"kid":        kid,
				"signature":  signature,
			}}
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
	return Checkpoint{Seq: seq, Hash: hash, Time: t, KID: kid, Signature: signature}, nil
}

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
