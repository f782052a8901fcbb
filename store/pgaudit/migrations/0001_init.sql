-- 0001: the audit chain. Applied with the schema alone on the search path.
-- Every name starts with audit_ so the log may share a schema with the
-- approval store (store/pgstore) and the other custos tables.

-- audit_meta holds the log's identity: one row, created with the schema.
CREATE TABLE audit_meta (
	singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
	log_id     text        NOT NULL CHECK (log_id <> ''),
	created_at timestamptz NOT NULL DEFAULT now()
);

-- audit_head is the chain's head: one row, locked (SELECT ... FOR UPDATE)
-- by every transaction that appends or redacts, so the writers of every
-- replica take turns and the chain has one order. last_seq and last_hash
-- are those of the last record; 0 and '' while the chain is empty.
CREATE TABLE audit_head (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	last_seq  bigint  NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
	last_hash text    NOT NULL DEFAULT ''
);
INSERT INTO audit_head (singleton) VALUES (true);

-- audit_records is the chain: seq 1, 2, 3, ... without gaps. record is the
-- record's RFC 8785 form, hash included, byte for byte as audit.Log
-- produced it (bytea: never re-encoded, re-ordered or transcoded); the
-- other columns copy members of it for indexes and the purge job.
-- Verification reads seq and record only.
CREATE TABLE audit_records (
	seq          bigint      PRIMARY KEY CHECK (seq >= 1),
	time         timestamptz NOT NULL,
	kind         text        NOT NULL,
	message_id   text        NOT NULL DEFAULT '',
	-- audit.FormatTime (fixed-width UTC, nanoseconds), '' for never:
	-- compared bytewise (COLLATE "C"), that order is time order.
	retain_until text        COLLATE "C" NOT NULL DEFAULT '',
	redacted     boolean     NOT NULL DEFAULT false,
	prev         text        NOT NULL,
	hash         text        NOT NULL,
	record       bytea       NOT NULL
);

-- The purge job's work list.
CREATE INDEX audit_records_expiring ON audit_records (retain_until)
	WHERE NOT redacted AND retain_until <> '';

CREATE INDEX audit_records_message ON audit_records (message_id) WHERE message_id <> '';

-- Guards against accidents, not against the table's owner or a superuser
-- (they can disable or drop triggers); the hash chain is what detects
-- tampering. Records are never deleted or truncated, the only update is a
-- redaction that keeps seq, prev and hash, and the head only moves forward.
CREATE FUNCTION audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'audit records are never deleted or truncated (%)', TG_TABLE_NAME
		USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE FUNCTION audit_only_redact() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.redacted OR NOT NEW.redacted OR NEW.seq <> OLD.seq
		OR NEW.prev <> OLD.prev OR NEW.hash <> OLD.hash THEN
		RAISE EXCEPTION 'audit records are only ever redacted (seq %)', OLD.seq
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	RETURN NEW;
END;
$$;

CREATE FUNCTION audit_head_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.singleton IS DISTINCT FROM OLD.singleton OR NEW.last_seq <= OLD.last_seq THEN
		RAISE EXCEPTION 'the audit head only moves forward (from seq %)', OLD.last_seq
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	RETURN NEW;
END;
$$;

CREATE TRIGGER audit_records_no_delete BEFORE DELETE ON audit_records
	FOR EACH ROW EXECUTE FUNCTION audit_refuse();
CREATE TRIGGER audit_records_no_truncate BEFORE TRUNCATE ON audit_records
	FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse();
CREATE TRIGGER audit_records_only_redact BEFORE UPDATE ON audit_records
	FOR EACH ROW EXECUTE FUNCTION audit_only_redact();
CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head
	FOR EACH ROW EXECUTE FUNCTION audit_refuse();
CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head
	FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse();
CREATE TRIGGER audit_head_forward BEFORE UPDATE ON audit_head
	FOR EACH ROW EXECUTE FUNCTION audit_head_forward();
