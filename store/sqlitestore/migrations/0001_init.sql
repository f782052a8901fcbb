-- 0001: the initial schema.
--
-- meta holds the store's identity: one row, created with the schema and
-- given a new store_id by Reset.
CREATE TABLE meta (
	singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
	store_id   TEXT    NOT NULL CHECK (store_id <> ''),
	created_at TEXT    NOT NULL
) STRICT;

-- events is the ordered log: sequence 1, 2, 3, ... without gaps. The JSON is
-- the aais.Marshal output of the message, sequence included.
CREATE TABLE events (
	sequence   INTEGER PRIMARY KEY CHECK (sequence >= 1),
	type       TEXT    NOT NULL,
	request_id TEXT    NOT NULL,
	json       BLOB    NOT NULL
) STRICT;

-- requests holds every request ever created; ids are never reused.
-- resolved mirrors "a resolutions row exists" (kept by the trigger below) so
-- that Pending reads only the pending requests through a partial index.
CREATE TABLE requests (
	id          TEXT    PRIMARY KEY,
	fingerprint TEXT    NOT NULL CHECK (fingerprint <> ''),
	event       BLOB    NOT NULL,
	sequence    INTEGER NOT NULL UNIQUE REFERENCES events (sequence),
	resolved    INTEGER NOT NULL DEFAULT 0 CHECK (resolved IN (0, 1))
) STRICT;

CREATE INDEX requests_pending ON requests (sequence) WHERE resolved = 0;

-- resolutions: at most one per request, enforced by the primary key.
CREATE TABLE resolutions (
	request_id           TEXT    PRIMARY KEY REFERENCES requests (id),
	decision_fingerprint TEXT    NOT NULL,
	event                BLOB    NOT NULL,
	sequence             INTEGER NOT NULL UNIQUE REFERENCES events (sequence)
) STRICT;

CREATE TRIGGER resolutions_mark_resolved AFTER INSERT ON resolutions
BEGIN
	UPDATE requests SET resolved = 1 WHERE id = NEW.request_id;
END;
