-- 0002: the AAIS approval request of an exchange that waits for a human
-- (migration 0003 of the SQLite store): recorded when the exchange is
-- created, so that a gateway that stopped before submitting it can finish.
ALTER TABLE exchanges ADD COLUMN request bytea;
