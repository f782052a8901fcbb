-- 0001: ARSIA-State entries, their history and grants, in the state file.
-- Times are Unix nanoseconds (UTC).
--
-- state_keys: one row per key ever written; head is the seq of its newest
-- version, purged_at is set once PURGE erased its values (NULL otherwise).
CREATE TABLE state_keys (
	key       TEXT    PRIMARY KEY CHECK (key <> ''),
	head      INTEGER NOT NULL,
	purged_at INTEGER
) STRICT, WITHOUT ROWID;

-- state_versions: every version of every key, oldest first (seq from 1).
-- at is when SNAPSHOT sees the version from; value is canonical JSON
-- (RFC 8785), NULL once purged.
CREATE TABLE state_versions (
	key            TEXT    NOT NULL,
	seq            INTEGER NOT NULL CHECK (seq >= 1),
	at             INTEGER NOT NULL,
	owner          TEXT    NOT NULL,
	scope          TEXT    NOT NULL,
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	expires_at     INTEGER NOT NULL DEFAULT 0,
	retention_days INTEGER NOT NULL DEFAULT 0,
	data_residency TEXT    NOT NULL DEFAULT '',
	pii            TEXT    NOT NULL,
	pii_categories TEXT    NOT NULL DEFAULT '',
	version        INTEGER NOT NULL,
	deleted        INTEGER NOT NULL DEFAULT 0,
	value          BLOB,
	PRIMARY KEY (key, seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX state_versions_at ON state_versions (at);

-- state_grants: GRANTs in creation order (seq), revoked ones included.
-- valid_until 0 means none; revoked_at NULL means in force.
CREATE TABLE state_grants (
	id           TEXT    PRIMARY KEY CHECK (id <> ''),
	seq          INTEGER NOT NULL UNIQUE,
	grantor      TEXT    NOT NULL,
	pattern      TEXT    NOT NULL,
	grantee      TEXT    NOT NULL,
	access_level TEXT    NOT NULL,
	valid_until  INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	revoked_at   INTEGER
) STRICT;

CREATE INDEX state_grants_grantee ON state_grants (grantee, grantor);
CREATE INDEX state_grants_grantor ON state_grants (grantor);
