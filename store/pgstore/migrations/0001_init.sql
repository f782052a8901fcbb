-- 0001: the initial schema. It runs with search_path set to the store's
-- schema, so every name below lands in that schema.
--
-- meta is one row: the store's identity and the sequence of the last event
-- recorded. Every write that appends events locks this row (SELECT ... FOR
-- UPDATE) before it reads anything it decides on, and sets latest_sequence
-- in the same transaction, so sequences are handed out one writer at a
-- time, in commit order. store_id is created with the schema and replaced
-- by Reset.
CREATE TABLE meta (
	singleton       boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
	store_id        text        NOT NULL CHECK (store_id <> ''),
	latest_sequence bigint      NOT NULL DEFAULT 0
		CHECK (latest_sequence BETWEEN 0 AND 9007199254740991),
	created_at      timestamptz NOT NULL DEFAULT now()
);

-- events is the ordered log: sequence 1, 2, 3, ... without gaps. json is the
-- aais.Marshal output of the message, sequence included, byte for byte.
CREATE TABLE events (
	sequence   bigint PRIMARY KEY CHECK (sequence BETWEEN 1 AND 9007199254740991),
	type       text   NOT NULL,
	request_id text   NOT NULL,
	json       bytea  NOT NULL
);

-- requests holds every request ever created; ids are never reused. resolved
-- mirrors "a resolutions row exists" (set in the transaction that inserts
-- it) so that Pending reads only the pending requests, through the partial
-- index requests_pending. owner is the JSON of the aais.ProcessIdentity of
-- the process that created the request; NULL when not tracked.
CREATE TABLE requests (
	id          text    PRIMARY KEY,
	fingerprint text    NOT NULL CHECK (fingerprint <> ''),
	event       bytea   NOT NULL,
	sequence    bigint  NOT NULL UNIQUE REFERENCES events (sequence),
	owner       bytea,
	resolved    boolean NOT NULL DEFAULT false
);

CREATE INDEX requests_pending ON requests (sequence) WHERE NOT resolved;

-- resolutions: at most one per request, enforced by the primary key.
-- by_rule names the rule that approved the request automatically; '' when
-- a decision or the runtime resolved it.
CREATE TABLE resolutions (
	request_id           text   PRIMARY KEY REFERENCES requests (id),
	decision_fingerprint text   NOT NULL,
	by_rule              text   NOT NULL DEFAULT '',
	event                bytea  NOT NULL,
	sequence             bigint NOT NULL UNIQUE REFERENCES events (sequence)
);

-- rules holds every rule ever saved, revoked ones included; json is the
-- rule's aais JSON form (revocation included). request_id is the approved
-- request the rule came from; a request makes at most one rule.
CREATE TABLE rules (
	id         text    PRIMARY KEY,
	request_id text    NOT NULL UNIQUE REFERENCES requests (id),
	revoked    boolean NOT NULL DEFAULT false,
	json       bytea   NOT NULL
);
