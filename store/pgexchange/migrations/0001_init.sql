-- 0001: the exchange store on PostgreSQL. It mirrors the SQLite schema of
-- package exchange (migrations 0001 and 0002 there), with the same CHECK
-- constraints and the same guards as PL/pgSQL triggers. It runs with
-- search_path set to the store's schema, so every name below lands there;
-- none of them clashes with the approval store's (store/pgstore), so both
-- may share one schema.
--
-- Times are Unix nanoseconds, UTC, as in SQLite (0 = none): bigint keeps
-- them exact, where timestamptz would round to microseconds.

-- One row per ARSIA request the gateway received. seq is the order of
-- receipt (an identity, assigned at insert); id the opaque handle of the
-- status URL; (sender, message_id) the idempotency key of a retried
-- request. reply and decision are the envelopes byte for byte (bytea,
-- never re-encoded), NULL while there is none.
CREATE TABLE exchanges (
	seq            bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id             text    NOT NULL UNIQUE CHECK (id <> ''),
	sender         text    NOT NULL CHECK (sender <> ''),
	message_id     text    NOT NULL CHECK (message_id <> ''),
	correlation_id text    NOT NULL,
	capability     text    NOT NULL CHECK (capability <> ''),
	approval_id    text    NOT NULL,
	action_digest  text    NOT NULL,
	state          text    NOT NULL CHECK (state IN
		('received', 'pending_approval', 'approved', 'executing', 'done', 'failed')),
	reply          bytea,
	reply_status   integer NOT NULL CHECK (reply_status = 0 OR reply_status BETWEEN 100 AND 599),
	claimed_by     text    NOT NULL,
	created_at     bigint  NOT NULL,
	updated_at     bigint  NOT NULL,
	deadline       bigint  NOT NULL,
	decision       bytea,
	trace_id       text    NOT NULL DEFAULT '',
	UNIQUE (sender, message_id),
	-- Waiting for or holding an approval needs to know which one, and for
	-- which action.
	CHECK (state NOT IN ('pending_approval', 'approved') OR (approval_id <> '' AND action_digest <> '')),
	-- A state the sender is answered from has its answer.
	CHECK (state NOT IN ('pending_approval', 'done', 'failed') OR (reply IS NOT NULL AND reply_status <> 0)),
	CHECK ((reply IS NULL) = (reply_status = 0))
);

CREATE INDEX exchanges_state ON exchanges (state, seq);

-- The state machine, enforced again below the Go code: every update is one
-- legal transition (a finished exchange is never rewritten), what
-- identifies an exchange never changes, and a decision is recorded once.
CREATE FUNCTION exchanges_guard_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT (
		(OLD.state = 'received' AND NEW.state IN ('executing', 'pending_approval', 'failed')) OR
		(OLD.state = 'pending_approval' AND NEW.state IN ('approved', 'failed')) OR
		(OLD.state = 'approved' AND NEW.state IN ('executing', 'failed')) OR
		(OLD.state = 'executing' AND NEW.state IN ('done', 'failed'))
	) OR NEW.seq IS DISTINCT FROM OLD.seq OR NEW.id IS DISTINCT FROM OLD.id
		OR NEW.sender IS DISTINCT FROM OLD.sender OR NEW.message_id IS DISTINCT FROM OLD.message_id
		OR NEW.correlation_id IS DISTINCT FROM OLD.correlation_id
		OR NEW.capability IS DISTINCT FROM OLD.capability OR NEW.created_at IS DISTINCT FROM OLD.created_at
		OR (OLD.approval_id <> '' AND NEW.approval_id IS DISTINCT FROM OLD.approval_id)
		OR (OLD.action_digest <> '' AND NEW.action_digest IS DISTINCT FROM OLD.action_digest)
	THEN
		RAISE EXCEPTION 'exchange: illegal update' USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	IF OLD.decision IS NOT NULL AND NEW.decision IS DISTINCT FROM OLD.decision THEN
		RAISE EXCEPTION 'exchange: a decision is recorded once' USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NEW;
END;
$$;

CREATE TRIGGER exchanges_transition BEFORE UPDATE ON exchanges
	FOR EACH ROW EXECUTE FUNCTION exchanges_guard_update();

-- Exchanges are never deleted by the gateway (nor truncated, which
-- bypasses row triggers).
CREATE FUNCTION exchanges_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'exchange: exchanges are never deleted' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER exchanges_no_delete BEFORE DELETE ON exchanges
	FOR EACH ROW EXECUTE FUNCTION exchanges_refuse_delete();
CREATE TRIGGER exchanges_no_truncate BEFORE TRUNCATE ON exchanges
	FOR EACH STATEMENT EXECUTE FUNCTION exchanges_refuse_delete();

-- An ARSIA idempotency key (Core §10) names the exchange it was first used
-- for, within its scope (from, to, payload type, key). fingerprint is the
-- request's arsia.IdempotencyFingerprint: the same key with another request
-- is a conflict. A row past expires_at counts as absent and is replaced or
-- purged.
CREATE TABLE idempotency (
	scope_from   text   NOT NULL,
	scope_to     text   NOT NULL,
	payload_type text   NOT NULL,
	idem_key     text   NOT NULL CHECK (idem_key <> ''),
	fingerprint  text   NOT NULL CHECK (fingerprint <> ''),
	exchange_id  text   NOT NULL REFERENCES exchanges (id),
	expires_at   bigint NOT NULL,
	PRIMARY KEY (scope_from, scope_to, payload_type, idem_key)
);

CREATE INDEX idempotency_expiry ON idempotency (expires_at);
CREATE INDEX idempotency_exchange ON idempotency (exchange_id);

-- A review a compliance profile demands after execution
-- (required_post_execution, required_within_24h): created in the same
-- transaction as the exchange's final state, due at due_at. reviewed_at 0
-- means open; timed_out says an oversight_timeout was raised for it.
CREATE TABLE reviews (
	exchange_id   text    PRIMARY KEY REFERENCES exchanges (id),
	mode          text    NOT NULL CHECK (mode <> ''),
	profile       text    NOT NULL,
	sender        text    NOT NULL,
	capability    text    NOT NULL,
	outcome       text    NOT NULL, -- how the execution ended: done or failed
	created_at    bigint  NOT NULL,
	due_at        bigint  NOT NULL,
	reviewed_at   bigint  NOT NULL DEFAULT 0,
	reviewer      text    NOT NULL DEFAULT '',
	verdict       text    NOT NULL DEFAULT '' CHECK (verdict IN ('', 'accepted', 'flagged')),
	justification text    NOT NULL DEFAULT '',
	timed_out     integer NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1)),
	CHECK ((reviewed_at = 0) = (verdict = '' AND reviewer = ''))
);

CREATE INDEX reviews_open ON reviews (reviewed_at, due_at);

-- A finished review is never rewritten.
CREATE FUNCTION reviews_guard_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.reviewed_at <> 0 AND (NEW.reviewed_at IS DISTINCT FROM OLD.reviewed_at
		OR NEW.verdict IS DISTINCT FROM OLD.verdict OR NEW.reviewer IS DISTINCT FROM OLD.reviewer
		OR NEW.justification IS DISTINCT FROM OLD.justification)
	THEN
		RAISE EXCEPTION 'exchange: a review is recorded once' USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NEW;
END;
$$;

CREATE TRIGGER reviews_once BEFORE UPDATE ON reviews
	FOR EACH ROW EXECUTE FUNCTION reviews_guard_update();

-- Signed envelopes to deliver to a sender's callback URL (approval
-- decisions, final replies), in order per exchange; written in the same
-- transaction as the state they report. delivered_at 0 = not yet; given_up
-- 1 = attempts exhausted (the status URL still has the reply).
-- DueDeliveries leases the rows it hands out by moving next_attempt
-- forward, so that one replica at a time posts an envelope.
CREATE TABLE deliveries (
	seq          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	exchange_id  text    NOT NULL REFERENCES exchanges (id),
	url          text    NOT NULL CHECK (url <> ''),
	envelope     bytea   NOT NULL,
	attempts     integer NOT NULL DEFAULT 0,
	next_attempt bigint  NOT NULL,
	delivered_at bigint  NOT NULL DEFAULT 0,
	given_up     integer NOT NULL DEFAULT 0 CHECK (given_up IN (0, 1)),
	last_error   text    NOT NULL DEFAULT ''
);

CREATE INDEX deliveries_due ON deliveries (delivered_at, given_up, next_attempt);
CREATE INDEX deliveries_exchange ON deliveries (exchange_id, seq) WHERE delivered_at = 0 AND given_up = 0;
