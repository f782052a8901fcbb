-- 0002: idempotency keys, approval decisions, post-execution reviews and
-- callback deliveries.

-- An ARSIA idempotency key (Core §10) names the exchange it was first used
-- for, within its scope (from, to, payload type, key). fingerprint is the
-- request's arsia.IdempotencyFingerprint: the same key with another
-- request is a conflict. A row past expires_at (Unix ns) counts as absent
-- and is replaced or purged.
CREATE TABLE idempotency (
	scope_from   TEXT    NOT NULL,
	scope_to     TEXT    NOT NULL,
	payload_type TEXT    NOT NULL,
	idem_key     TEXT    NOT NULL CHECK (idem_key <> ''),
	fingerprint  TEXT    NOT NULL CHECK (fingerprint <> ''),
	exchange_id  TEXT    NOT NULL REFERENCES exchanges (id),
	expires_at   INTEGER NOT NULL,
	PRIMARY KEY (scope_from, scope_to, payload_type, idem_key)
) STRICT;

CREATE INDEX idempotency_expiry ON idempotency (expires_at);

-- The signed ARSIA approval_decision envelope of an exchange that waited
-- for a human, kept byte for byte; set once, when the approval resolved.
ALTER TABLE exchanges ADD COLUMN decision BLOB;

-- The W3C trace id of the request ('' when none), for the records that
-- come after it (reviews, timeouts).
ALTER TABLE exchanges ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';

CREATE TRIGGER exchanges_decision_once BEFORE UPDATE OF decision ON exchanges
WHEN OLD.decision IS NOT NULL AND NEW.decision IS NOT OLD.decision
BEGIN
	SELECT RAISE(ABORT, 'exchange: a decision is recorded once');
END;

-- A review a compliance profile demands after execution
-- (required_post_execution, required_within_24h): created in the same
-- write as the exchange's final state, due at due_at (Unix ns). reviewed_at
-- 0 means open; timed_out says an oversight_timeout was raised for it.
CREATE TABLE reviews (
	exchange_id   TEXT    PRIMARY KEY REFERENCES exchanges (id),
	mode          TEXT    NOT NULL CHECK (mode <> ''),
	profile       TEXT    NOT NULL,
	sender        TEXT    NOT NULL,
	capability    TEXT    NOT NULL,
	outcome       TEXT    NOT NULL, -- how the execution ended: done or failed
	created_at    INTEGER NOT NULL,
	due_at        INTEGER NOT NULL,
	reviewed_at   INTEGER NOT NULL DEFAULT 0,
	reviewer      TEXT    NOT NULL DEFAULT '',
	verdict       TEXT    NOT NULL DEFAULT '' CHECK (verdict IN ('', 'accepted', 'flagged')),
	justification TEXT    NOT NULL DEFAULT '',
	timed_out     INTEGER NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1)),
	CHECK ((reviewed_at = 0) = (verdict = '' AND reviewer = ''))
) STRICT;

CREATE INDEX reviews_open ON reviews (reviewed_at, due_at);

-- A finished review is never rewritten.
CREATE TRIGGER reviews_once BEFORE UPDATE ON reviews
WHEN OLD.reviewed_at <> 0 AND (NEW.reviewed_at IS NOT OLD.reviewed_at OR NEW.verdict IS NOT OLD.verdict
	OR NEW.reviewer IS NOT OLD.reviewer OR NEW.justification IS NOT OLD.justification)
BEGIN
	SELECT RAISE(ABORT, 'exchange: a review is recorded once');
END;

-- Signed envelopes to deliver to a sender's callback URL (approval
-- decisions, final replies), in order per exchange; written in the same
-- transaction as the state they report. delivered_at 0 = not yet;
-- given_up 1 = attempts exhausted (the status URL still has the reply).
CREATE TABLE deliveries (
	seq          INTEGER PRIMARY KEY,
	exchange_id  TEXT    NOT NULL REFERENCES exchanges (id),
	url          TEXT    NOT NULL CHECK (url <> ''),
	envelope     BLOB    NOT NULL,
	attempts     INTEGER NOT NULL DEFAULT 0,
	next_attempt INTEGER NOT NULL,
	delivered_at INTEGER NOT NULL DEFAULT 0,
	given_up     INTEGER NOT NULL DEFAULT 0 CHECK (given_up IN (0, 1)),
	last_error   TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX deliveries_due ON deliveries (delivered_at, given_up, next_attempt);
