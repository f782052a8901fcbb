// Package schema is ARSIA's "L1" validation: the structural check of an
// envelope, or of any other ARSIA document, against the protocol's JSON
// Schemas (draft 2020-12), before the L2 semantic rules run. The reference
// SDK reports L1 failures only, skipping L2, when L1 fails.
//
// # Schemas
//
// The 31 upstream schema files (arsialabs/arsia-protocol-sdk shared/schemas,
// Apache-2.0) are embedded byte for byte in schemas/; Names and File expose
// them. They are compiled lazily, each ref once, by
// github.com/santhosh-tekuri/jsonschema/v6; compiled schemas are shared by
// concurrent callers.
//
// # Reference resolution
//
// The files reference each other by file name ("$ref":
// "arsia-common.schema.json#/$defs/agent-id") while their $ids are URLs
// with other paths (https://arsiaprotocol.org/schemas/message/v1.0.json), so
// standard resolution yields URLs that exist nowhere. Like the reference
// SDK's retrieve hook, the loader serves a requested URL by exact $id first
// and otherwise by the last segment of its path, read as a file name. A
// file whose $id is not an absolute URL (arsia-common.schema.json) is
// loaded from an invented https://arsia.invalid/schemas/ base. No network
// or file system access ever happens: an unknown name is ErrUnknownSchema.
//
// # Messages
//
// The conformance suites and peers match on the reference SDK's error
// texts, which are Python jsonschema's, so Error reproduces them:
//
//   - one Error per failure Python's iter_errors yields: $ref, allOf,
//     if/then/else, dependentSchemas and propertyNames contribute their
//     subschemas' failures; anyOf and oneOf contribute a single "... is not
//     valid under any of the given schemas" at the instance; not
//     contributes "... should not be valid under {...}";
//   - Python's wording and repr() quoting: 'strings', True/False/None,
//     ints as ints and floats in Python's shortest form (150.123, 1e-05,
//     1.0), schema values with their keys in file order;
//   - the SDK's rewrites of the four recurring patterns (agent id, UUID,
//     version, capability);
//   - String() is the SDK's "<pointer>: <message>" with "<root>" for the
//     instance itself; errors are sorted by pointer, indices numerically.
//
// Where santhosh-tekuri's semantics differ from Python's in ways that change
// verdicts, the keywords are evaluated the Python way by a private
// vocabulary: multipleOf uses Python float division (0.07 is not a multiple
// of 0.01), and a value failing type, const or enum still gets its other
// keywords checked and reported.
//
// Known differences from the reference, none affecting the upstream
// vectors' verdicts: Go maps have no key order, so an object instance in a
// message shows its keys sorted where Python shows them in document order;
// errors at the same pointer may come in another order than Python's
// (which follows the schema's keyword order);
// patterns are Go RE2 (\d and \w are ASCII-only and $ does not match before
// a final newline, so Custos is the stricter); a oneOf matched by more than
// two branches names only the first two; format is not asserted, as in
// Python jsonschema without a format checker.
//
// Instances are decoded JSON: map[string]any, []any, string, bool, nil and
// numbers as json.Number, float64 or Go integers. Anything else (NaN,
// infinities, other Go types, malformed json.Number text) is reported as
// "... is not a JSON value" and nothing else is checked.
package schema
