-- 0001: the DPoP jti replay set, in the state file.
--
-- One row per accepted DPoP proof: its jti and the last instant the proof
-- could still be accepted (iat + skew), in Unix nanoseconds. A row whose
-- expires_at is before the caller's now is forgotten: Seen overwrites it,
-- the pruning in Seen deletes it in bounded batches through the index.
CREATE TABLE dpop_replay (
	jti        TEXT    PRIMARY KEY CHECK (jti <> ''),
	expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX dpop_replay_expires_at ON dpop_replay (expires_at);
