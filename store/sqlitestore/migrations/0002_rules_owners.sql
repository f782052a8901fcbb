-- 0002: remembered decisions (rules) and request owners.
--
-- owner is the JSON of the aais.ProcessIdentity of the process that
-- created the request and waits to run its action; NULL when not tracked.
ALTER TABLE requests ADD COLUMN owner BLOB;

-- by_rule names the rule that approved the request automatically; '' when
-- a decision or the runtime resolved it.
ALTER TABLE resolutions ADD COLUMN by_rule TEXT NOT NULL DEFAULT '';

-- rules holds every rule ever saved, revoked ones included; json is the
-- rule's aais JSON form (revocation included). request_id is the approved
-- request the rule came from; a request makes at most one rule.
CREATE TABLE rules (
	id         TEXT    PRIMARY KEY,
	request_id TEXT    NOT NULL UNIQUE REFERENCES requests (id),
	revoked    INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1)),
	json       BLOB    NOT NULL
) STRICT;
