// Package arsia implements the protocol core of ARSIA 1.0 (Actions,
// Routing, State, Identity, Assets): signed, compliance-tagged JSON
// envelopes exchanged between AI agents.
//
// The package depends only on the standard library and on packages jcs
// (RFC 8785) and asc (status codes). JSON Schema validation (L1), the
// compliance profiles and signing live in the subpackages schema,
// compliance and sig.
//
// # Envelopes
//
// Envelope mirrors the wire message; NewRequest, NewResponse, NewEvent,
// NewError, NewPendingApproval and NewApprovalDecision build one from
// BuildOptions, whose Now is required: builders never read the clock.
// ParseEnvelope decodes strictly (duplicate member names and
// non-interoperable numbers are refused) into the generic form that
// validation and signatures work on; EnvelopeFromMap and Envelope.Map
// convert between the two without losing members, empty values or number
// literals.
//
// # Validation
//
// ValidateSemantic applies the L2 rules of Core §4 to the generic form and
// returns Issues with the reference SDK's codes and messages;
// CheckIdentityConsistency compares from, kid and IdentityRecord.
// ValidateActionDescriptor and ValidateExplanation check ARSIA-Actions
// objects.
//
// # Identity, capabilities and versions
//
// ParseAgentID parses agent:org.name[.sub...][/resource]. ValidateCapability,
// MatchCapability, MatchCapabilities and DowngradeCapabilities implement
// the capability grammar, wildcard scopes and the explicit-grant-only
// reserved capabilities. ParseVersion, CompareVersions, IsCompatible and
// Negotiate handle the "major.minor" wire version.
//
// # Errors
//
// Every error wraps a sentinel (ErrInvalidAgentID, ...). *Error carries an
// ARSIA code, an English description and the wire details; WireCode maps
// internal codes to the 14 wire codes, ToASC and Error.AsASC to ASC
// statuses (docs/arsia-errors.md). RetryDelay and RoutingRetryDelay give
// the back-off of Core §11.3 and ARSIA-Routing.
package arsia
