-- 0003: keep every message once. Until now the approval.requested and
-- approval.resolved messages were stored twice, in the event log and in
-- requests.event / resolutions.event; the rows now find them in the log
-- by their sequence. (Events a request or resolution points to must never
-- be deleted from the log.)
ALTER TABLE requests DROP COLUMN event;
ALTER TABLE resolutions DROP COLUMN event;
