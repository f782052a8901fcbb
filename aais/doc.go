// Package aais reads, checks and writes the messages of the Agent Approval
// Interchange Specification (AAIS) 1.0: how an AI agent's runtime (the
// authority) asks a person to authorize one exact action, and how the answer
// and its receipt travel back.
//
// Five message types share one envelope (Message):
//
//   - approval.requested carries a Request: the exact action as JSON, the
//     digest of that JSON, who asks (Origin), an advisory Risk, the Choices
//     offered and an optional expiry;
//   - approval.decided carries a Decision: a presenter's answer, naming the
//     request, the digest the reviewer saw and one offered (decision, scope)
//     pair;
//   - approval.resolved carries a Resolution, the authority's receipt;
//   - approval.snapshot carries the pending requests for a reconnecting
//     presenter;
//   - approval.activity carries display-only progress.
//
// # The digest binding
//
// action_digest is "sha256:" + hex(SHA-256(JCS(action))) over the action
// object exactly as transmitted. Action keeps that JSON as received and is
// written back as those bytes; the digest is always recomputed from them,
// never from a re-encoded Go struct, which would drop "effects": [] or
// "redacted": false and produce a digest no other implementation
// reproduces. NewAction and NewRequest refuse Go structs for that reason.
//
// # What Parse checks
//
// Parse decodes strictly (jcs.Decode), validates against the embedded AAIS
// 1.0 JSON Schema (Schema, upstream byte for byte), then applies the rules a
// single document can be checked against (see the Rule constants). Every
// rejection is a *ValidationError listing issues with JSON Pointer paths;
// errors.Is distinguishes ErrMalformed, ErrSchema, ErrDigestMismatch and
// ErrSemantic. Marshal, NewMessage and the builders run the same checks on
// what they produce, so nothing invalid is emitted.
//
// What needs state or a clock is not checked here: whether a request has
// expired by now, whether a decision's digest matches its request (stale),
// replays and conflicts, whether the action about to run is still the one
// approved. Those are the Authority's job (below).
//
// # The authority
//
// Authority turns decisions into receipts over a Store. Decide checks, in
// this order: an identical replay of the decision that resolved the request
// gets the same receipt (same ids and sequence; "identical" is the JCS digest
// of the decision body with the authenticated actor in it); any other
// decision on a resolved request gets outcome conflict and changes nothing;
// an unknown request is ErrUnknownRequest; then expired (the authority's
// clock, now >= expires_at), stale (the decision's digest, or the digest of
// the action about to run, differs from the request's), invalid (the
// (decision, scope) pair was not offered), and finally approved, denied or
// cancelled. Every outcome except conflict resolves the request, so a bad
// decision fails closed and the agent must ask again. The actor comes from
// the caller's authenticated channel when the caller passes one.
// ExpireOverdue and CancelOwned resolve overdue requests as expired and an
// origin's pending requests as cancelled.
//
// A Store persists a request before its event is visible, resolves each
// request at most once (ResolveIfPending), and numbers its events 1, 2, 3...
// without gaps. Package aais/aaistest is the conformance kit every store
// runs; store/memstore is the in-memory store.
//
// # Time and identifiers
//
// Nothing in this package reads a clock: builders take every time as a
// parameter. Generated ids ("apr_", "dec_", "res_", "evt_" + 32 hex digits)
// come from Options.Rand, crypto/rand by default.
package aais
