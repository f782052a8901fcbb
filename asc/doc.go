// Package asc implements ASC 0.1, Agent Status Codes: machine-readable
// status and error envelopes (application/agent-status+json) for AI agents,
// with registered four-digit codes, a retry contract, provenance and causes.
//
// ASC 0.1 is an experimental draft; this package implements it as published
// at upstream commit 6c0e2a1 and says so (RegistryVersion). Where the
// specification is silent, the choices are documented in docs/asc.md.
//
// # Consuming
//
// Parse is the lenient consumer: unknown members are kept (Extra fields) and
// re-emitted by Marshal, null optional members are accepted, unknown codes
// are kept and degrade to their first-digit class (ClassOf). It is strict
// only where leniency would be unsafe: input is decoded with package jcs,
// so duplicate member names, invalid UTF-8 and oversized or over-deep
// documents are refused before anything else; known members must have the
// right JSON type; the status object and its terminal flag must be present.
//
// # Producing
//
// New builds a minimum envelope; Validate (or Check, for the warnings too)
// applies every producer rule and returns a *ValidationError whose Issues
// carry a JSON Pointer path, a stable rule id (the Rule constants) and a
// level: LevelError for a MUST, LevelWarning for a SHOULD. CheckJSON and
// ValidateJSON do both steps on raw bytes and report every issue at once.
//
// # Registry
//
// The 43 registered codes live in registry.json and are compiled into
// constants (RateLimited, ResultStateUnknown, ...) by go generate; Lookup,
// LookupName, Registry and Explain read them.
//
// # Retry
//
// DecideRetry applies the retry contract: a 5xxx class alone never implies a
// safe retry, RESULT_STATE_UNKNOWN yields ReconcileFirst, and budgets,
// deadlines, side-effect state and idempotency are all checked.
//
// # Bindings
//
// ToProblem/FromProblem (RFC 9457 Problem Details), ToMCPToolResult/
// FromMCPToolResult (MCP tool results), A2AStateFor/CheckA2A (A2A task
// states) and SpanAttributes/SpanIsError (OpenTelemetry) carry a status over
// other protocols without importing them.
//
// # Errors
//
// *Error carries an envelope through Go error chains: return
// Errorf(PermissionDenied, ScopeToolCall, "..."), and let a transport call
// FromError, which falls back to INTERNAL_ERROR without leaking the
// internal error text.
package asc
