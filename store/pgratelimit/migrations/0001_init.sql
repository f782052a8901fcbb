-- 0001: per-sender token buckets shared by every replica. It runs with
-- search_path set to the schema, so every name below lands in that schema.
--
-- One row per sender that made a request: the tokens left at "at", the
-- latest request time seen (the callers' clocks, never the database's),
-- and whether the latest request was allowed (so that one statement can
-- both update the bucket and say what it decided). A missing row is a full
-- bucket; rows idle long enough to have refilled are pruned through the
-- "at" index.
CREATE TABLE rate_buckets (
	sender  text             PRIMARY KEY,
	tokens  double precision NOT NULL,
	at      timestamptz      NOT NULL,
	allowed boolean          NOT NULL
);

CREATE INDEX rate_buckets_at ON rate_buckets (at);
