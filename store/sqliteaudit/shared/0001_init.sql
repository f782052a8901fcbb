-- 0001: the audit chain, in a database file shared with the other stores
-- (the same tables as a file of its own after its migration 0002).
--
-- audit_meta holds the log's identity: one row, created with the schema.
CREATE TABLE audit_meta (
	singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
	log_id     TEXT    NOT NULL CHECK (log_id <> ''),
	created_at TEXT    NOT NULL
) STRICT;

-- audit_records is the chain: seq 1, 2, 3, ... without gaps. json is the record's
-- RFC 8785 form, hash included, exactly as audit.Record.MarshalJSON wrote
-- it; the other columns copy members of it for indexes and the purge job.
-- Verification reads json only.
CREATE TABLE audit_records (
	seq          INTEGER PRIMARY KEY CHECK (seq >= 1),
	time         TEXT    NOT NULL,
	kind         TEXT    NOT NULL,
	message_id   TEXT    NOT NULL DEFAULT '',
	retain_until TEXT    NOT NULL DEFAULT '',
	redacted     INTEGER NOT NULL DEFAULT 0 CHECK (redacted IN (0, 1)),
	prev         TEXT    NOT NULL,
	hash         TEXT    NOT NULL,
	json         TEXT    NOT NULL
) STRICT;

-- The purge job's work list: records not yet redacted that have a retention
-- end (fixed-width UTC strings sort as times).
CREATE INDEX audit_records_expiring ON audit_records (retain_until)
	WHERE redacted = 0 AND retain_until <> '';

CREATE INDEX audit_records_message ON audit_records (message_id) WHERE message_id <> '';

-- Guards against accidents, not attackers (whoever can write the file can
-- drop them; the hash chain is what detects tampering): records are never
-- deleted, and the only update is a redaction that keeps seq, prev and hash.
CREATE TRIGGER audit_records_no_delete BEFORE DELETE ON audit_records
BEGIN
	SELECT RAISE(ABORT, 'audit records are never deleted');
END;

CREATE TRIGGER audit_records_only_redact BEFORE UPDATE ON audit_records
WHEN NOT (OLD.redacted = 0 AND NEW.redacted = 1 AND NEW.seq = OLD.seq
	AND NEW.prev = OLD.prev AND NEW.hash = OLD.hash)
BEGIN
	SELECT RAISE(ABORT, 'audit records are only ever redacted');
END;
