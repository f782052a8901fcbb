// Package jcs implements the JSON Canonicalization Scheme of RFC 8785 and the
// "sha256:" digests that ARSIA signatures and AAIS action bindings are
// computed over.
//
// Input is decoded strictly as I-JSON (RFC 7493) before anything is hashed or
// signed: duplicate member names, invalid UTF-8, lone surrogate escapes,
// non-finite numbers and numbers that cannot travel between implementations
// without changing value are rejected, and depth and size are capped. Every
// rejection is an *Error naming the JSON Pointer path of the offending value.
//
// # Numbers
//
// RFC 8785 serializes numbers as ECMAScript's Number.prototype.toString does
// for IEEE 754 doubles. A number literal is rejected (ErrNumber) when
//
//   - it overflows a double (1e400),
//   - it is not zero but rounds to zero (1e-400), or
//   - it is written as an integer (no fraction, no exponent) beyond
//     ±(2^53-1) whose digits are not exactly the canonical form of the double
//     it denotes: 9007199254740993 and 12345678901234567890 are refused,
//     100000000000000000000 (the canonical form of 1e20) is accepted.
//
// The last rule follows RFC 7493 §2.2: such integers, typically identifiers
// and amounts, silently change value when a peer reads them as doubles, so a
// peer that keeps integers exactly and a peer that uses doubles would compute
// different digests. They must travel as strings. Integers whose digits are
// already the canonical form of a double read the same in both kinds of peer,
// and canonical output must stay valid input. A literal such as 1e21 or
// 12345678901234567890.0 is accepted: its writer asked for a double.
//
// # Values that are already decoded
//
// CanonicalizeValue accepts only the generic shapes produced by a JSON
// decoder (map[string]any, []any, string, bool, nil, float64, json.Number,
// json.RawMessage and Go integer types). It refuses structs on purpose:
// re-encoding a struct drops empty arrays, false values and unknown members
// under omitempty and changes the digest, which is how other AAIS libraries
// came to compute digests that no peer can reproduce.
package jcs
