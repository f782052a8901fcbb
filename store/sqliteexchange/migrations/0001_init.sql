-- 0001: the initial schema.
--
-- exchanges holds one row per ARSIA request the gateway received. seq is the
-- order of receipt (one writer at a time, so it is a total order across
-- processes); id is the opaque handle of the status URL; (sender,
-- message_id) is the idempotency key of a retried request. Times are Unix
-- nanoseconds, UTC; deadline 0 means none. reply is the envelope exactly as
-- given (bytes kept, never re-encoded), NULL while there is none.
CREATE TABLE exchanges (
	seq            INTEGER PRIMARY KEY,
	id             TEXT    NOT NULL UNIQUE CHECK (id <> ''),
	sender         TEXT    NOT NULL CHECK (sender <> ''),
	message_id     TEXT    NOT NULL CHECK (message_id <> ''),
	correlation_id TEXT    NOT NULL,
	capability     TEXT    NOT NULL CHECK (capability <> ''),
	approval_id    TEXT    NOT NULL,
	action_digest  TEXT    NOT NULL,
	state          TEXT    NOT NULL CHECK (state IN
		('received', 'pending_approval', 'approved', 'executing', 'done', 'failed')),
	reply          BLOB,
	reply_status   INTEGER NOT NULL CHECK (reply_status = 0 OR reply_status BETWEEN 100 AND 599),
	claimed_by     TEXT    NOT NULL,
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	deadline       INTEGER NOT NULL,
	UNIQUE (sender, message_id),
	-- Waiting for or holding an approval needs to know which one, and for
	-- which action.
	CHECK (state NOT IN ('pending_approval', 'approved') OR (approval_id <> '' AND action_digest <> '')),
	-- A state the sender is answered from has its answer.
	CHECK (state NOT IN ('pending_approval', 'done', 'failed') OR (reply IS NOT NULL AND reply_status <> 0)),
	CHECK ((reply IS NULL) = (reply_status = 0))
) STRICT;

CREATE INDEX exchanges_state ON exchanges (state, seq);

-- The state machine, enforced again below the Go code: every update is one
-- legal transition (a finished exchange is never rewritten), and what
-- identifies an exchange never changes.
CREATE TRIGGER exchanges_transition BEFORE UPDATE ON exchanges
WHEN NOT (
	(OLD.state = 'received' AND NEW.state IN ('executing', 'pending_approval', 'failed')) OR
	(OLD.state = 'pending_approval' AND NEW.state IN ('approved', 'failed')) OR
	(OLD.state = 'approved' AND NEW.state IN ('executing', 'failed')) OR
	(OLD.state = 'executing' AND NEW.state IN ('done', 'failed'))
) OR NEW.seq IS NOT OLD.seq OR NEW.id IS NOT OLD.id OR NEW.sender IS NOT OLD.sender
	OR NEW.message_id IS NOT OLD.message_id OR NEW.correlation_id IS NOT OLD.correlation_id
	OR NEW.capability IS NOT OLD.capability OR NEW.created_at IS NOT OLD.created_at
	OR (OLD.approval_id <> '' AND NEW.approval_id IS NOT OLD.approval_id)
	OR (OLD.action_digest <> '' AND NEW.action_digest IS NOT OLD.action_digest)
BEGIN
	SELECT RAISE(ABORT, 'exchange: illegal update');
END;

-- Exchanges are never deleted by the gateway.
CREATE TRIGGER exchanges_no_delete BEFORE DELETE ON exchanges
BEGIN
	SELECT RAISE(ABORT, 'exchange: exchanges are never deleted');
END;
