-- 0004: the last heartbeat of every gateway process that claims exchanges
-- (Store.Heartbeat), so that a process whose heartbeat stopped (killed,
-- its host gone) can be told from one still running its claims
-- (Store.Abandoned). Times are Unix nanoseconds.
CREATE TABLE instances (
    name    TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 256),
    seen_at INTEGER NOT NULL
) STRICT;
