-- 0002: the tables take the names they have in a database file the audit
-- log shares with the other stores (package store), so that one set of
-- statements serves both.
ALTER TABLE meta RENAME TO audit_meta;
ALTER TABLE records RENAME TO audit_records;
