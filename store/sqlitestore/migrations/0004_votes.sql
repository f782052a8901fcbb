-- 0004: the votes of requests that need several approvals
-- (aais.QuorumExtension).
--
-- position orders a request's votes (0, 1, 2, ...); a reviewer votes once
-- per request. vote is the aais.Vote's JSON; fingerprint the decision's.
-- sequence is the approval.activity event the vote recorded, NULL for the
-- vote that resolved the request (its receipt is the resolution's event).
CREATE TABLE votes (
	request_id  TEXT    NOT NULL REFERENCES requests (id),
	position    INTEGER NOT NULL CHECK (position >= 0),
	actor_id    TEXT    NOT NULL CHECK (actor_id <> ''),
	fingerprint TEXT    NOT NULL CHECK (fingerprint <> ''),
	vote        BLOB    NOT NULL,
	sequence    INTEGER UNIQUE REFERENCES events (sequence),
	PRIMARY KEY (request_id, position),
	UNIQUE (request_id, actor_id)
) STRICT;
