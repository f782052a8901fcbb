-- 0003: the last heartbeat of every replica that claims exchanges
-- (Store.Heartbeat; migration 0004 of the SQLite store), so that a replica
-- whose heartbeat stopped (killed, its host gone) can be told from one
-- still running its claims (Store.Abandoned). Times are Unix nanoseconds.
CREATE TABLE instances (
    name    text   PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 256),
    seen_at bigint NOT NULL
);
