package asc

import _ "embed"

//go:embed schema/agent-status.schema.json
var schemaJSON string

// SchemaID is the $id of the envelope schema.
const SchemaID = "https://github.com/custos-runtime/custos/asc/schema/agent-status.schema.json"

// Schema returns Custos' JSON Schema (draft 2020-12) for the ASC 0.1
// envelope, a fresh copy on every call. ASC publishes no schema of its own.
// The schema checks structure only; Validate applies every rule, including
// those a schema cannot express (registered code/name pairs, cause-tree
// limits, SHOULD-level warnings).
func Schema() []byte { return []byte(schemaJSON) }
