package pgstore

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/migrations"
	"github.com/custos-runtime/custos/internal/pgutil"
)

// errNoChange, returned by a write function, rolls its transaction back
// and reports success: the function found nothing to write (a request that
// exists, a resolution already recorded) and set its results.
var errNoChange = pgutil.ErrNoChange

// errBusy: the write depends on another write of the same batch (the same
// request or rule); it is run again alone once the batch committed.
var errBusy = errors.New("claimed by another write of the batch")

// writeQueued runs prep, which reads and locks what a write decides on and
// returns the *pending it appends (or errNoChange), in a READ COMMITTED
// transaction, alone or with concurrent writes (pgutil.Batcher; alone when
// Options.MaxBatch is 1), and then appends every pending of the
// transaction in one statement and commits (finish). A context done before
// the commit writes nothing, transient failures are retried, and a commit
// whose outcome is unknown is not (pgutil.ErrCommitUnknown).
//
// The first reads of every write in a batch, queued by queue
// (pgutil.Batcher.WriteQueued; nil queues none), take one round trip
// together.
func (s *Store) writeQueued(ctx context.Context, queue func(*pgx.Batch), prep func(ctx context.Context, tx pgx.Tx, b *pgutil.Batch) (*pending, error)) error {
	return s.batcher.WriteQueued(ctx, queue, func(ctx context.Context, tx pgx.Tx, b *pgutil.Batch) (any, error) {
		p, err := prep(ctx, tx, b)
		if err != nil {
			return nil, err
		}
		return p, nil
	})
}

// writeTx runs fn in a transaction of its own (pgutil.Runner.Write), for
// the writes that do not go through finish: Import, Reset, RevokeRule and
// the migrations.
func (s *Store) writeTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.runner.Write(ctx, fn)
}

// read runs fn (a single statement, or statements that need no common
// snapshot) and retries it on the same transient failures as write.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.runner.Read(ctx, fn)
}

// seqKey is how Marshal writes a message's sequence: the message's fifth
// member, after four strings, so its first occurrence is that member.
var seqKey = []byte(`"sequence":` + strconv.FormatUint(aais.MaxSequence, 10))

// eventTemplate is the JSON of an event around its sequence: for every
// sequence n, aais.Marshal of the message with sequence n is pre, n in
// decimal, suf. finish builds the stored JSON so, in SQL, once the
// sequence is known.
type eventTemplate struct {
	pre, suf  []byte
	typ       aais.Type
	requestID string
}

// template marshals m (validating it) with its sequence left open.
func template(m *aais.Message, requestID string) (eventTemplate, error) {
	c := *m
	c.Sequence = aais.MaxSequence
	b, err := aais.Marshal(&c)
	if err != nil {
		return eventTemplate{}, err
	}
	i := bytes.Index(b, seqKey)
	end := i + len(seqKey)
	if i < 0 || end >= len(b) || (b[end] != ',' && b[end] != '}') {
		return eventTemplate{}, errors.New("pgstore: cannot place the sequence in the event's JSON")
	}
	pre := b[: i+len(`"sequence":`) : i+len(`"sequence":`)]
	return eventTemplate{pre: pre, suf: b[end:], typ: c.Type, requestID: requestID}, nil
}

// json is the event's JSON at sequence seq, as finish stores it.
func (t eventTemplate) json(seq uint64) []byte {
	out := make([]byte, 0, len(t.pre)+20+len(t.suf))
	out = append(out, t.pre...)
	out = strconv.AppendUint(out, seq, 10)
	return append(out, t.suf...)
}

// pending is what one write appends: its events, in order, and the rows
// that carry them. finish gives the events consecutive sequences and sets
// first, the sequence of events[0].
type pending struct {
	events      []eventTemplate
	requests    []requestRow
	resolutions []resolutionRow
	resolve     []string // requests marked resolved
	rules       []ruleRow
	votes       []voteRow

	first uint64
}

// requestRow and resolutionRow carry the event at index ev of their
// pending.
type requestRow struct {
	id, fingerprint string
	owner           []byte
	resolved        bool
	ev              int
}

type resolutionRow struct {
	requestID, decisionFingerprint, byRule string
	ev                                     int
}

// voteRow is a vote; ev is the index of its activity event, -1 for none.
type voteRow struct {
	requestID, actorID, fingerprint string
	position                        int
	vote                            []byte
	ev                              int
}

type ruleRow struct {
	id, requestID string
	revoked       bool
	json          []byte
}

// event adds t and returns its index.
func (p *pending) event(t eventTemplate) int {
	p.events = append(p.events, t)
	return len(p.events) - 1
}

// seq is the sequence of event i, once finish has run.
func (p *pending) seq(i int) uint64 { return p.first + uint64(i) }

// appendSQL appends the events of a transaction and their rows in one
// statement. The meta row is locked by its UPDATE, the first thing the
// statement does: under READ COMMITTED an UPDATE that waited for the row
// continues from the row as its previous holder committed it, so base is
// that holder's last sequence. Every other part reads m, so nothing is
// written if meta is missing (no row returned). The statement's other
// reads would see the snapshot taken before the lock was granted, so
// there are none: uniqueness (a request created concurrently, a rule id
// taken) is checked by the indexes, which see every committed row.
const appendSQL = `
WITH m AS (
	UPDATE meta SET latest_sequence = latest_sequence + $1 WHERE singleton
	RETURNING latest_sequence - $1 AS base, latest_sequence AS latest, store_id
), e AS (
	SELECT u.o, m.base + u.o AS seq, u.t, u.rid, u.pre || convert_to((m.base + u.o)::text, 'UTF8') || u.suf AS json
	FROM m, unnest($2::text[], $3::text[], $4::bytea[], $5::bytea[]) WITH ORDINALITY AS u(t, rid, pre, suf, o)
), ie AS (
	INSERT INTO events (sequence, type, request_id, json) SELECT seq, t, rid, json FROM e
), iq AS (
	INSERT INTO requests (id, fingerprint, event, sequence, owner, resolved)
	SELECT r.id, r.fp, e.json, e.seq, r.owner, r.resolved
	FROM unnest($6::text[], $7::text[], $8::bytea[], $9::bool[], $10::bigint[]) AS r(id, fp, owner, resolved, ev)
	JOIN e ON e.o = r.ev
), ir AS (
	INSERT INTO resolutions (request_id, decision_fingerprint, by_rule, event, sequence)
	SELECT r.rid, r.dfp, r.br, e.json, e.seq
	FROM unnest($11::text[], $12::text[], $13::text[], $14::bigint[]) AS r(rid, dfp, br, ev)
	JOIN e ON e.o = r.ev
), ur AS (
	UPDATE requests SET resolved = true FROM m WHERE requests.id = ANY($15::text[])
), il AS (
	INSERT INTO rules (id, request_id, revoked, json)
	SELECT u.id, u.rid, u.revoked, u.json
	FROM m, unnest($16::text[], $17::text[], $18::bool[], $19::bytea[]) AS u(id, rid, revoked, json)
), iv AS (
	INSERT INTO votes (request_id, position, actor_id, fingerprint, vote, sequence)
	SELECT v.rid, v.pos, v.aid, v.fp, v.vote, e.seq
	FROM m CROSS JOIN unnest($21::text[], $22::int[], $23::text[], $24::text[], $25::bytea[], $26::bigint[]) AS v(rid, pos, aid, fp, vote, ev)
	LEFT JOIN e ON e.o = v.ev
)
SELECT base, store_id, pg_notify($20, store_id || ':' || latest) FROM m`

// finish appends what the writes of one transaction prepared (appendSQL)
// and commits, in one round trip: the meta row is locked for that
// statement and the commit only. PostgreSQL delivers the notification
// '<store_id>:<last sequence>' at commit, only if it commits.
func (s *Store) finish(ctx context.Context, tx pgx.Tx, prepared []any) error {
	return s.appendEvents(ctx, tx, prepared, true)
}

// appendOne appends what one write prepared inside a unit of work
// (pgutil.Units), without committing: the meta row stays locked until the
// unit commits, and its notification is delivered then.
func (s *Store) appendOne(ctx context.Context, tx pgx.Tx, prepared any) error {
	return s.appendEvents(ctx, tx, []any{prepared}, false)
}

// appendEvents is finish, and appendOne when commit is false.
func (s *Store) appendEvents(ctx context.Context, tx pgx.Tx, prepared []any, commit bool) error {
	var (
		types, rids           []string
		pres, sufs            [][]byte
		qIDs, qFPs            []string
		qOwners               [][]byte
		qResolved             []bool
		qEv                   []int64
		sRIDs, sDFPs, sByRule []string
		sEv                   []int64
		resolve               []string
		lIDs, lRIDs           []string
		lRevoked              []bool
		lJSON                 [][]byte
		vRIDs, vAIDs, vFPs    []string
		vPos                  []int32
		vJSON                 [][]byte
		vEv                   []int64
		ps                    = make([]*pending, 0, len(prepared))
		offsets               = make([]int64, 0, len(prepared))
		n                     int64
	)
	for _, v := range prepared {
		p := v.(*pending)
		ps = append(ps, p)
		offsets = append(offsets, n)
		for _, t := range p.events {
			types, rids = append(types, string(t.typ)), append(rids, t.requestID)
			pres, sufs = append(pres, t.pre), append(sufs, t.suf)
		}
		for _, r := range p.requests {
			qIDs, qFPs, qOwners = append(qIDs, r.id), append(qFPs, r.fingerprint), append(qOwners, r.owner)
			qResolved, qEv = append(qResolved, r.resolved), append(qEv, n+int64(r.ev)+1)
		}
		for _, r := range p.resolutions {
			sRIDs, sDFPs, sByRule = append(sRIDs, r.requestID), append(sDFPs, r.decisionFingerprint), append(sByRule, r.byRule)
			sEv = append(sEv, n+int64(r.ev)+1)
		}
		resolve = append(resolve, p.resolve...)
		for _, r := range p.rules {
			lIDs, lRIDs, lRevoked, lJSON = append(lIDs, r.id), append(lRIDs, r.requestID), append(lRevoked, r.revoked), append(lJSON, r.json)
		}
		for _, v := range p.votes {
			vRIDs, vAIDs, vFPs = append(vRIDs, v.requestID), append(vAIDs, v.actorID), append(vFPs, v.fingerprint)
			vPos, vJSON = append(vPos, int32(v.position)), append(vJSON, v.vote)
			ev := int64(0) // matches no event: ordinality starts at 1
			if v.ev >= 0 {
				ev = n + int64(v.ev) + 1
			}
			vEv = append(vEv, ev)
		}
		n += int64(len(p.events))
	}
	if n == 0 || n > aais.MaxSequence {
		return errors.New("pgstore: a write without events")
	}
	var b pgx.Batch
	b.Queue(appendSQL, n, types, rids, pres, sufs, qIDs, qFPs, qOwners, qResolved, qEv,
		sRIDs, sDFPs, sByRule, sEv, resolve, lIDs, lRIDs, lRevoked, lJSON, s.channel,
		vRIDs, vPos, vAIDs, vFPs, vJSON, vEv)
	var base int64
	read := func(br pgx.BatchResults) error {
		var id string
		err := br.QueryRow().Scan(&base, &id, nil)
		if errors.Is(err, pgx.ErrNoRows) {
			return errMetaMissing
		}
		return err
	}
	var err error
	if commit {
		err = pgutil.SendCommit(ctx, tx, &b, read)
	} else {
		br := tx.SendBatch(ctx, &b)
		err = errors.Join(read(br), br.Close())
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23514" && (pe.TableName == "meta" || pe.TableName == "events") {
		// latest_sequence or an event's sequence beyond MaxSequence.
		return aais.ErrSequenceExhausted
	}
	if err != nil {
		return err
	}
	if base < 0 {
		return fmt.Errorf("event log damaged: latest sequence %d", base)
	}
	for i, p := range ps {
		p.first = uint64(base+offsets[i]) + 1
	}
	return nil
}

// appender hands out the sequences of an Import, which locks the meta row
// first (lockMeta) and holds it for the whole transaction, as the writes
// of older builds do: a bulk load is one transaction, and it COPYs its
// rows after deciding which are new under that lock.
type appender struct {
	tx      pgx.Tx
	storeID string
	// latest is the last sequence assigned (initially the stored one).
	latest  uint64
	initial uint64
	b       pgx.Batch
}

// lockMeta locks the meta row for the rest of tx and returns an appender
// continuing from the stored latest sequence. Under READ COMMITTED a
// SELECT ... FOR UPDATE that had to wait returns the row as the previous
// holder committed it, and every later statement of tx sees that holder's
// writes: whatever tx reads after lockMeta is what the previous writer
// left, and no other writer can append before tx ends.
func lockMeta(ctx context.Context, tx pgx.Tx) (*appender, error) {
	a := &appender{tx: tx}
	var n int64
	err := tx.QueryRow(ctx, "SELECT latest_sequence, store_id FROM meta WHERE singleton FOR UPDATE").Scan(&n, &a.storeID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errMetaMissing
	}
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("event log damaged: latest sequence %d", n)
	}
	a.latest, a.initial = uint64(n), uint64(n)
	return a, nil
}

// flush queues the meta update and the notification (delivered by
// PostgreSQL at commit, and only if the transaction commits) and sends the
// batch. It does nothing when nothing was queued.
func (a *appender) flush(ctx context.Context, channel string) error {
	if a.b.Len() == 0 && a.latest == a.initial {
		return nil
	}
	if a.latest != a.initial {
		a.b.Queue("UPDATE meta SET latest_sequence = $1 WHERE singleton", int64(a.latest))
		a.b.Queue("SELECT pg_notify($1, $2)", channel, a.storeID+":"+strconv.FormatUint(a.latest, 10))
	}
	n := a.b.Len()
	br := a.tx.SendBatch(ctx, &a.b)
	var first error
	for range n {
		if _, err := br.Exec(); err != nil && first == nil {
			first = err
		}
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations returns the embedded migrations in version order.
func loadMigrations() ([]migrations.Migration, error) {
	return migrations.Load(migrationFS, "migrations")
}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// MigrationLockKey is the pg_advisory_xact_lock key Open holds while it
// checks and applies migrations (pgutil.MigrationLockKey): one constant
// for every custos schema and store in the database, so concurrent first
// opens by several replicas apply each migration once.
const MigrationLockKey int64 = pgutil.MigrationLockKey

// migrate creates the schema when missing and applies the migrations it
// lacks, in one transaction holding the advisory lock MigrationLockKey
// (pgutil.Migrate). A replica that starts meanwhile waits for the lock and
// then finds them applied. The store's identity is created with the first
// migration; a schema whose tables exist without it is refused rather
// than silently given a new identity, and so is a schema newer than this
// build.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	q := pgx.Identifier{s.schema}.Sanitize() + "."
	return s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		err := pgutil.Migrate(ctx, tx, pgutil.Schema{Name: s.schema, Table: "schema_migrations", Migrations: ms,
			TooNew: ErrSchemaTooNew, Applied: func(ctx context.Context, tx pgx.Tx, m migrations.Migration) error {
				if m.Version != 1 {
					return nil
				}
				_, err := tx.Exec(ctx, "INSERT INTO "+q+"meta (store_id) VALUES ($1)", newID())
				return err
			}})
		if err != nil {
			return err
		}
		var id string
		err = tx.QueryRow(ctx, "SELECT store_id FROM "+q+"meta WHERE singleton").Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return errMetaMissing
		}
		return err
	})
}
