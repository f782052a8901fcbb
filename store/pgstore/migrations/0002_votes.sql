-- 0002: the votes of requests that need several approvals
-- (aais.QuorumExtension).
--
-- position orders a request's votes (0, 1, 2, ...); a reviewer votes once
-- per request. vote is the aais.Vote's JSON; fingerprint the decision's.
-- sequence is the approval.activity event the vote recorded, NULL for the
-- vote that resolved the request (its receipt is the resolution's event).
-- A vote is written by the statement that appends its event, in the
-- transaction that holds the request's row lock (FOR UPDATE), so votes
-- are counted one writer at a time, on every replica.
CREATE TABLE votes (
	request_id  text    NOT NULL REFERENCES requests (id),
	position    integer NOT NULL CHECK (position >= 0),
	actor_id    text    NOT NULL CHECK (actor_id <> ''),
	fingerprint text    NOT NULL CHECK (fingerprint <> ''),
	vote        bytea   NOT NULL,
	sequence    bigint  UNIQUE REFERENCES events (sequence),
	PRIMARY KEY (request_id, position),
	CONSTRAINT votes_one_per_actor UNIQUE (request_id, actor_id)
);
