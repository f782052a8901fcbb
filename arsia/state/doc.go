// Package state implements ARSIA-State, the memory of ARSIA agents: what an
// agent remembers, who may read it, how long it must be kept and where.
//
// # The model in five minutes
//
// State is a set of entries. Every entry has a key of the form
//
//	agent:<owner>/<scope>/<name>        e.g. agent:acme.billing/agent/client-preferences
//
// whose first part is the owning agent's identifier (agents write only
// under their own name), whose second part is one of four scopes, and
// whose last part is free-form (it may contain '/'). Keys are at most 512
// characters of [A-Za-z0-9:._/-]; local names starting with
// "arsiaprotocol." are reserved for the implementation. ParseKey and
// KeyPolicy check them.
//
// The scope says how long an entry lives and who sees it:
//
//   - session: scratch data of one request/response chain, at most 24
//     hours, never persisted or audited;
//   - agent: the owner's private, durable memory;
//   - shared: durable data the owner shares with named agents through
//     grants;
//   - global: read-only reference data run by the platform operator;
//     agents never write it.
//
// An Entry carries the value (any JSON value up to 1 MiB; NaN and
// infinities are not JSON, binary data travels as base64 text), its owner
// and scope, timestamps, an optional expiry and retention override, a
// version number for optimistic concurrency, and a GDPR classification:
// none, pseudonymised, personal or sensitive. Personal and sensitive
// entries may be written only by an envelope whose compliance object
// names a legal basis (an Art. 9 one for sensitive data), and personal data
// must stay inside the envelope's data-residency zone. ValidateEntry
// applies all these rules.
//
// # Operations
//
// Agents manipulate state with eight request messages whose payload.type
// is arsiaprotocol.state/<op>: GET, SET, DELETE (logical: hidden but kept
// for audit), QUERY (filters, paging), SNAPSHOT (the state as of a past
// instant), PURGE (GDPR Art. 17 erasure of the value and its whole
// history), GRANT (share keys matching a pattern such as
// agent:acme.alpha/shared/report-* with another agent, read or read_write)
// and REVOKE. The *Args types build and check each request's arguments;
// Parse*Args read them from a received payload. RequiredCapability gives
// the capability each needs (read for GET/QUERY, write for
// SET/DELETE/GRANT/REVOKE, and the elevated purge and snapshot, which a
// wildcard such as arsiaprotocol.state.* never covers); Authorize checks a
// token scope.
//
// # Stores
//
// Store is the storage interface (context first, the operation's time
// last: stores never read the clock); its errors are *arsia.Error values
// carrying the wire code (forbidden, not_found, conflict with
// {current_version, expected_version}, ...). MemoryStore implements it in
// memory with full version history, logical deletes, snapshots, purges and
// grants; TxStore implements the same rules on any transactional Backend
// (store/sqlitestate, store/pgstate). The kit statetest holds every Store
// to one behaviour.
//
// # Compliance
//
// An entry must be kept for its effective retention: the larger of its
// compliance profile's retention_days and its own (EffectiveRetention;
// GDPR-STANDARD sets none). Writes, deletes, grants and revocations are
// audited when the profile requires it, and purges always: NewAuditRecord
// builds the record from the operation's envelope, hashing the payload
// (PayloadHash) and never copying the value. The profiles and the common
// audit members come from package compliance.
//
// # Where Custos uses it
//
// The ARSIA conformance run (package conformance, custos conformance
// arsia) checks it against the upstream suite, and custos serve serves it
// when state is enabled (gateway/handler.State, docs/state.md).
package state
