-- 0001: ARSIA-State entries, their history and grants. It runs with
-- search_path set to the schema, so every name below lands in that
-- schema. Times are Unix nanoseconds (UTC); 0 means absent where noted.
--
-- state_keys: one row per key ever written; head is the seq of its newest
-- version, purged_at is set once PURGE erased its values.
CREATE TABLE state_keys (
	key       text   PRIMARY KEY CHECK (key <> ''),
	head      bigint NOT NULL,
	purged_at bigint
);

-- state_versions: every version of every key (seq from 1). at is when
-- SNAPSHOT sees it from; value is canonical JSON (RFC 8785) as bytes, so
-- that it comes back exactly, NULL once purged.
CREATE TABLE state_versions (
	key            text    NOT NULL,
	seq            bigint  NOT NULL CHECK (seq >= 1),
	at             bigint  NOT NULL,
	owner          text    NOT NULL,
	scope          text    NOT NULL,
	created_at     bigint  NOT NULL,
	updated_at     bigint  NOT NULL,
	expires_at     bigint  NOT NULL DEFAULT 0,
	retention_days integer NOT NULL DEFAULT 0,
	data_residency text    NOT NULL DEFAULT '',
	pii            text    NOT NULL,
	pii_categories text    NOT NULL DEFAULT '',
	version        integer NOT NULL,
	deleted        boolean NOT NULL DEFAULT false,
	value          bytea,
	PRIMARY KEY (key, seq)
);

CREATE INDEX state_versions_at ON state_versions (at);

-- state_grants: GRANTs in creation order (seq), revoked ones included.
CREATE TABLE state_grants (
	id           text   PRIMARY KEY CHECK (id <> ''),
	seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
	grantor      text   NOT NULL,
	pattern      text   NOT NULL,
	grantee      text   NOT NULL,
	access_level text   NOT NULL,
	valid_until  bigint NOT NULL DEFAULT 0,
	created_at   bigint NOT NULL,
	revoked_at   bigint
);

CREATE INDEX state_grants_grantee ON state_grants (grantee, grantor);
CREATE INDEX state_grants_grantor ON state_grants (grantor);
