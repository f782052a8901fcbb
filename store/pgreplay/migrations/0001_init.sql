-- 0001: the DPoP jti replay set. It runs with search_path set to the
-- schema, so every name below lands in that schema.
--
-- One row per accepted DPoP proof: its jti and the last instant the proof
-- could still be accepted (iat + skew). A row whose expires_at is before
-- the caller's now is forgotten: Seen overwrites it, Prune deletes it in
-- bounded batches through the expires_at index.
CREATE TABLE dpop_replay (
	jti        text        PRIMARY KEY CHECK (jti <> ''),
	expires_at timestamptz NOT NULL
);

CREATE INDEX dpop_replay_expires_at ON dpop_replay (expires_at);
