-- 0005: the once-only steps of reminders, escalations and deadlines
-- (Store.ClaimStep, package notify's Escalator): one row per step key,
-- claimed by one process at a time and done once. Times are Unix
-- nanoseconds; done_at 0 is not done.
CREATE TABLE steps (
    key        TEXT    PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 512),
    claimed_by TEXT    NOT NULL,
    claimed_at INTEGER NOT NULL,
    done_at    INTEGER NOT NULL DEFAULT 0
) STRICT;
