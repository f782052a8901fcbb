-- 0003: the AAIS approval request of an exchange that waits for a human,
-- recorded in the same write that creates the exchange (JSON, byte for
-- byte; NULL when none is needed). A gateway that stops after creating the
-- exchange and before submitting its approval finishes the submission from
-- it (reconcile, or the sender's retry): no exchange is left in received.
ALTER TABLE exchanges ADD COLUMN request BLOB;
