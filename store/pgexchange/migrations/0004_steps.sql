-- 0004: the once-only steps of reminders, escalations and deadlines
-- (Store.ClaimStep; migration 0005 of the SQLite store): one row per step
-- key, claimed by one replica at a time and done once. Times are Unix
-- nanoseconds; done_at 0 is not done.
CREATE TABLE steps (
    key        text   PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 512),
    claimed_by text   NOT NULL,
    claimed_at bigint NOT NULL,
    done_at    bigint NOT NULL DEFAULT 0
);
