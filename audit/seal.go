package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// Sealed is a record ready to be stored: the record as Append returns it
// (Seq, Prev and Hash set) and JSON, its stored form (exactly
// Record.MarshalJSON of it).
type Sealed struct {
	Record Record
	JSON   []byte
}

// SealedBackend is a Backend that stores the JSON the Log hands it instead
// of encoding the record itself. Log.Append uses AppendSealed when the
// backend has it, so that nothing but linking the record to the previous
// one runs under the backend's write lock: the record is encoded,
// canonicalized and checked before the lock is taken, concurrently with
// other appends.
type SealedBackend interface {
	Backend
	// AppendSealed is Backend.Append, except that build also returns the
	// stored form of the record, which the backend stores as it is.
	AppendSealed(ctx context.Context, build func(last *Record) (Sealed, error)) (Record, error)
}

// sealRoom is how much seal may add to a prepared record: the hash member
// and a seq growing from the placeholder's one digit to sixteen.
const sealRoom = len(`,"hash":"sha256:"`) + 64 + 15

// span is one top-level member of a canonical JSON object: key and value
// in data[start:end], the key's name in data[start+1:keyEnd-1].
type span struct{ start, keyEnd, end int }

// prepared is a record encoded before its place in the chain is known:
// the canonical JSON of the record with seq 1 and prev Genesis as
// placeholders, cut into its top-level members so that seal can put the
// real seq and prev in and add the hash member without encoding again.
type prepared struct {
	rec     Record // normalised (as ParseRecord reads it back); Seq, Prev, Hash set by seal
	c       []byte // canonical form with the placeholders, without "hash"
	members []span
	iPrev   int // index in members of "prev"
	iSeq    int // index of "seq"
	iHash   int // index of the first member whose key sorts after "hash"
}

// prepare does, outside any lock, everything Append needs that does not
// depend on the previous record: time and retention, checks, the
// canonical form and the normalised record.
func (l *Log) prepare(rec Record, retention bool) (*prepared, error) {
	rec.Seq, rec.Prev, rec.Hash = 1, Genesis, ""
	if rec.Time.IsZero() {
		rec.Time = l.opts.Now()
	}
	rec.Time = rec.Time.UTC().Round(0)
	if rec.RetainUntil.IsZero() && retention && l.opts.Retention != nil {
		rec.RetainUntil = l.opts.Retention(rec)
	}
	if !rec.RetainUntil.IsZero() {
		rec.RetainUntil = rec.RetainUntil.UTC().Round(0)
	}
	if err := rec.check(); err != nil {
		return nil, err
	}
	c, err := rec.canonical()
	if err != nil {
		return nil, err
	}
	// The stored form, with the hash member and the real seq, must fit
	// too (ParseRecord refuses a longer one).
	if n := len(c) + sealRoom; n > MaxRecordSize {
		return nil, fmt.Errorf("%w: %d bytes with its hash, more than %d", ErrRecord, n, MaxRecordSize)
	}
	p := &prepared{c: c, iPrev: -1, iSeq: -1, iHash: -1}
	if p.members, err = topMembers(c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	for i, m := range p.members {
		key := string(c[m.start+1 : m.keyEnd-1])
		switch {
		case key == "prev":
			p.iPrev = i
		case key == "seq":
			p.iSeq = i
		}
		// Top-level member names are the ASCII names of wireRecord, for
		// which byte order is RFC 8785's UTF-16 order.
		if p.iHash < 0 && key > "hash" {
			p.iHash = i
		}
	}
	if p.iHash < 0 {
		p.iHash = len(p.members)
	}
	if p.iPrev < 0 || p.iSeq < 0 {
		return nil, fmt.Errorf("%w: canonical form lacks prev or seq", ErrRecord)
	}
	// Normalise: the record returned and stored is the one its JSON form
	// decodes to (details with json.Number values, no aliasing of the
	// caller's maps). c is this package's own canonical output, so the
	// strict checks of ParseRecord are not needed.
	if p.rec, err = p.normalised(rec); err != nil {
		return nil, err
	}
	return p, nil
}

// normalised returns what decoding p.c gives (decodeWire), without
// decoding the members that encoding leaves unchanged: valid UTF-8
// strings, integers and times already in UTC. Only details and arsia,
// which may hold any Go values, are decoded from their bytes.
func (p *prepared) normalised(rec Record) (Record, error) {
	for _, s := range [...]string{string(rec.Kind), rec.MessageID, rec.CorrelationID, rec.Sender,
		rec.Recipient, rec.Capability, rec.PayloadHash, rec.Profile, rec.Oversight, rec.Actor.ID,
		rec.Actor.Type, rec.Actor.AuthenticatedBy, rec.Outcome, rec.Status, rec.RequestID,
		rec.ResolutionID, rec.TraceID} {
		if !utf8.ValidString(s) {
			return decodeWire(p.c) // encoding replaced invalid bytes
		}
	}
	rec.Details, rec.ARSIA = nil, nil
	for _, m := range p.members {
		var dst any
		switch string(p.c[m.start+1 : m.keyEnd-1]) {
		case "details":
			dst = &rec.Details
		case "arsia":
			rec.ARSIA = new(compliance.AuditRecord)
			dst = rec.ARSIA
		default:
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(p.c[m.keyEnd+1 : m.end]))
		dec.UseNumber()
		if err := dec.Decode(dst); err != nil {
			return Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
		}
	}
	if len(rec.Details) == 0 {
		rec.Details = nil
	}
	return rec, nil
}

// seal gives the prepared record its place after last and its hash. It is
// what runs under the backend's write lock: a few appends and one SHA-256
// over the record's bytes.
func (p *prepared) seal(last *Record) (Sealed, error) {
	seq, prev := uint64(1), Genesis
	if last != nil {
		if last.Seq >= maxSeq || !isDigest(last.Hash) {
			return Sealed{}, fmt.Errorf("%w: the last record (seq %d) is damaged; run Verify", ErrRecord, last.Seq)
		}
		seq, prev = last.Seq+1, last.Hash
	}
	buf := make([]byte, 0, len(p.c)+sealRoom)
	buf = p.appendForm(buf, seq, prev, "")
	sum := sha256.Sum256(buf)
	var hash [len("sha256:") + 64]byte
	copy(hash[:], "sha256:")
	hex.Encode(hash[len("sha256:"):], sum[:])
	out := Sealed{Record: p.rec}
	out.Record.Seq, out.Record.Prev, out.Record.Hash = seq, prev, string(hash[:])
	out.JSON = p.appendForm(buf[:0:0], seq, prev, out.Record.Hash)
	return out, nil
}

// appendForm appends the record's canonical form with seq and prev, and
// with the hash member when hash is not empty.
func (p *prepared) appendForm(dst []byte, seq uint64, prev, hash string) []byte {
	dst = append(dst, '{')
	for i, m := range p.members {
		if i > 0 {
			dst = append(dst, ',')
		}
		if i == p.iHash && hash != "" {
			dst = append(append(append(dst, `"hash":"`...), hash...), `",`...)
		}
		switch i {
		case p.iPrev:
			dst = append(append(append(dst, `"prev":"`...), prev...), '"')
		case p.iSeq:
			dst = strconv.AppendUint(append(dst, `"seq":`...), seq, 10)
		default:
			dst = append(dst, p.c[m.start:m.end]...)
		}
	}
	if p.iHash == len(p.members) && hash != "" {
		dst = append(append(append(dst, `,"hash":"`...), hash...), '"')
	}
	return append(dst, '}')
}

// topMembers cuts a canonical JSON object (no whitespace) into its
// top-level members.
func topMembers(c []byte) ([]span, error) {
	if len(c) < 2 || c[0] != '{' || c[len(c)-1] != '}' {
		return nil, errors.New("not a JSON object")
	}
	members := make([]span, 0, 24)
	i := 1
	for i < len(c)-1 {
		var m span
		m.start = i
		if c[i] != '"' {
			return nil, fmt.Errorf("member name expected at byte %d", i)
		}
		j, err := skipString(c, i)
		if err != nil {
			return nil, err
		}
		m.keyEnd = j
		if j >= len(c) || c[j] != ':' {
			return nil, fmt.Errorf("':' expected at byte %d", j)
		}
		if m.end, err = skipValue(c, j+1); err != nil {
			return nil, err
		}
		members = append(members, m)
		i = m.end
		if c[i] == ',' {
			i++
		} else if i != len(c)-1 {
			return nil, fmt.Errorf("',' or '}' expected at byte %d", i)
		}
	}
	return members, nil
}

// skipString returns the index just past the string starting at c[i].
func skipString(c []byte, i int) (int, error) {
	for j := i + 1; j < len(c); j++ {
		switch c[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}

// skipValue returns the index just past the JSON value starting at c[i].
func skipValue(c []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(c); {
		switch c[j] {
		case '"':
			k, err := skipString(c, j)
			if err != nil {
				return 0, err
			}
			j = k
		case '{', '[':
			depth++
			j++
		case '}', ']':
			if depth == 0 {
				if j == i {
					return 0, fmt.Errorf("value expected at byte %d", i)
				}
				return j, nil
			}
			depth--
			j++
		case ',':
			if depth == 0 {
				if j == i {
					return 0, fmt.Errorf("value expected at byte %d", i)
				}
				return j, nil
			}
			j++
		default:
			j++
		}
		if depth == 0 && j > i && (c[j-1] == '"' || c[j-1] == '}' || c[j-1] == ']') {
			return j, nil
		}
	}
	return 0, errors.New("unterminated value")
}

// sealOnce prepares and seals rec in one step, for records whose place is
// already known (the purge record, written under the lock anyway).
func (l *Log) sealOnce(rec Record, last *Record, retention bool) (Sealed, error) {
	p, err := l.prepare(rec, retention)
	if err != nil {
		return Sealed{}, err
	}
	return p.seal(last)
}

// appendPrepared hands p to the backend.
func (l *Log) appendPrepared(ctx context.Context, p *prepared) (Record, error) {
	if sb, ok := l.b.(SealedBackend); ok {
		return sb.AppendSealed(ctx, p.seal)
	}
	return l.b.Append(ctx, func(last *Record) (Record, error) {
		s, err := p.seal(last)
		return s.Record, err
	})
}

// Sealing turns the build function of Backend.Append into one for
// SealedBackend.AppendSealed, the stored form being the record's
// MarshalJSON: a SealedBackend's Append is AppendSealed(ctx,
// Sealing(build)).
func Sealing(build func(last *Record) (Record, error)) func(last *Record) (Sealed, error) {
	return func(last *Record) (Sealed, error) {
		rec, err := build(last)
		if err != nil {
			return Sealed{}, err
		}
		data, err := rec.MarshalJSON()
		if err != nil {
			return Sealed{}, err
		}
		return Sealed{Record: rec, JSON: data}, nil
	}
}
