// Package identity implements the identity layer of ARSIA
// (ARSIA-Identity): identity records, X.509 trust levels and the
// receiver's minimum-trust policy.
//
// # Identity records
//
// An IdentityRecord, served at GET /.well-known/arsia/identity, binds an
// agent id to its legal owner, jurisdiction and EU AI Act classification,
// and may carry a certificate chain. ParseIdentityRecord decodes strictly
// (package jcs), validates against the embedded
// arsia-identity-record.schema.json and then the rules the schema cannot
// state. CheckLayers checks that the envelope's from, the kid's agent and
// the record's agent_id agree (Identity §1.1).
//
// # Trust levels
//
// An agent is L1 (keys self-asserted in its JWKS), L2 (a CA-issued X.509
// certificate binds its agent id to its key) or L3 (that certificate is an
// eIDAS qualified certificate, marked by the QcStatements extension).
// Two functions compute a level:
//
//   - ClassifyChain is the reference SDK's classification, which the
//     conformance suite fixes: it parses the chain and looks for
//     QcStatements, and verifies nothing. Use it to display or compare a
//     claim, never to decide.
//   - VerifyChain is the receiver's decision: path validation against
//     configured roots at an injected time, the agent id as a SAN URI of
//     the leaf, digitalSignature key usage, optionally the JWKS signing
//     key (key_mismatch) and revocation. Failures are *arsia.Error values
//     with the ARSIA certificate codes and details {reason}.
//
// # Policy
//
// Policy sets the minimum trust level per capability pattern and per
// compliance profile; Check answers forbidden with details
// {required_trust_level, actual_trust_level} when a sender falls short.
//
// Every error wraps one of this package's sentinels (ErrMalformedPEM,
// ErrCertificateInvalid, ...). Nothing here reads the clock, the network
// or the system trust store.
package identity
