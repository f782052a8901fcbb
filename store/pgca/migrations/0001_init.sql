-- 0001: the certificates the gateway's issuing CA signed. It runs with
-- search_path set to the schema, so every name below lands in that schema.
--
-- seq orders them by issuance (List pages newest first); revoked_at is NULL
-- while the certificate is valid.
CREATE TABLE ca_certificates (
	seq               bigserial   PRIMARY KEY,
	serial            text        NOT NULL UNIQUE CHECK (serial <> ''),
	agent_id          text        NOT NULL,
	not_before        timestamptz NOT NULL,
	not_after         timestamptz NOT NULL,
	chain_pem         bytea       NOT NULL,
	issued_by         text        NOT NULL,
	revoked_at        timestamptz,
	revoked_by        text        NOT NULL DEFAULT '',
	revocation_reason text        NOT NULL DEFAULT ''
);

CREATE INDEX ca_certificates_agent ON ca_certificates (agent_id, seq);
