-- 0001: the certificates the gateway's issuing CA signed, in the state file.
--
-- seq orders them by issuance (List pages newest first); revoked_at is
-- Unix nanoseconds, NULL while the certificate is valid.
CREATE TABLE ca_certificates (
	seq               INTEGER PRIMARY KEY AUTOINCREMENT,
	serial            TEXT    NOT NULL UNIQUE CHECK (serial <> ''),
	agent_id          TEXT    NOT NULL,
	not_before        INTEGER NOT NULL,
	not_after         INTEGER NOT NULL,
	chain_pem         BLOB    NOT NULL,
	issued_by         TEXT    NOT NULL,
	revoked_at        INTEGER,
	revoked_by        TEXT    NOT NULL DEFAULT '',
	revocation_reason TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX ca_certificates_agent ON ca_certificates (agent_id, seq);
