package aais

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/custos-runtime/custos/jcs"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// SchemaID is the $id of the embedded AAIS 1.0 JSON Schema.
const SchemaID = "https://raw.githubusercontent.com/alexmerced-oss/agent-approval-interchange-spec/v1.0.0/schema/v1/aais-1.0.schema.json"

// schemaJSON is upstream schema/v1/aais-1.0.schema.json, byte for byte
// (Apache-2.0; see NOTICE).
//
//go:embed schema/aais-1.0.schema.json
var schemaJSON []byte

// Schema returns a copy of the embedded AAIS 1.0 JSON Schema.
func Schema() []byte { return bytes.Clone(schemaJSON) }

// compiledSchemas holds the whole schema and, for clearer issues, each
// message kind's branch and the action definition.
type compiledSchemas struct {
	root     *jsonschema.Schema
	branches map[Type]*jsonschema.Schema
	action   *jsonschema.Schema
}

var branchDefs = map[Type]string{
	TypeRequested: "requestedEnvelope",
	TypeDecided:   "decidedEnvelope",
	TypeResolved:  "resolvedEnvelope",
	TypeSnapshot:  "snapshotEnvelope",
	TypeActivity:  "activityEnvelope",
}

// schemas compiles the embedded schema on first use. A failure here is a
// build defect, reported (not panicked) to every caller so they fail closed.
var schemas = sync.OnceValues(func() (*compiledSchemas, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("aais: embedded schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date-time is an assertion here, not an annotation
	if err := c.AddResource(SchemaID, doc); err != nil {
		return nil, fmt.Errorf("aais: embedded schema: %w", err)
	}
	s := &compiledSchemas{branches: map[Type]*jsonschema.Schema{}}
	if s.root, err = c.Compile(SchemaID); err != nil {
		return nil, fmt.Errorf("aais: embedded schema: %w", err)
	}
	for t, def := range branchDefs {
		if s.branches[t], err = c.Compile(SchemaID + "#/$defs/" + def); err != nil {
			return nil, fmt.Errorf("aais: embedded schema: %w", err)
		}
	}
	if s.action, err = c.Compile(SchemaID + "#/$defs/action"); err != nil {
		return nil, fmt.Errorf("aais: embedded schema: %w", err)
	}
	return s, nil
})

// schemaIssues validates a strictly decoded document against the whole
// schema. The whole schema decides; when it fails, the issues come from the
// branch the document's "type" selects, because the top-level oneOf would
// otherwise report every branch's complaint (mostly "type must be ...").
func schemaIssues(doc any) ([]Issue, error) {
	if fastValid(doc) { // certainly valid; see fastpath.go
		return nil, nil
	}
	s, err := schemas()
	if err != nil {
		return nil, err
	}
	verr := s.root.Validate(doc)
	if verr == nil {
		return nil, nil
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return []Issue{{Path: "", Rule: RuleType, Message: "an AAIS message is a JSON object"}}, nil
	}
	t, _ := obj["type"].(string)
	branch, known := s.branches[Type(t)]
	if !known {
		msg := `"type" is missing`
		if _, present := obj["type"]; present {
			msg = fmt.Sprintf(`"type" must be one of %s, %s, %s, %s, %s`,
				TypeRequested, TypeDecided, TypeResolved, TypeSnapshot, TypeActivity)
		}
		return []Issue{{Path: "/type", Rule: RuleType, Message: msg}}, nil
	}
	if berr := branch.Validate(doc); berr != nil {
		verr = berr
	}
	return validatorIssues(doc, verr), nil
}

// checkActionSchema validates raw action JSON (already decoded strictly)
// against the schema's action definition.
func checkActionSchema(raw []byte) error {
	s, err := schemas()
	if err != nil {
		return err
	}
	doc, err := jcs.Decode(raw)
	if err != nil {
		return &ValidationError{Issues: []Issue{{Path: jcsPath(err), Rule: RuleJSON, Message: err.Error()}}, cause: err}
	}
	if verr := s.action.Validate(doc); verr != nil {
		return &ValidationError{Issues: validatorIssues(doc, verr)}
	}
	return nil
}

// validatorIssues flattens the validator's error tree into its leaves: the
// keywords that actually failed.
//
// unevaluatedProperties needs care. The envelope kinds are allOf[base,
// kind] with unevaluatedProperties: false, and a branch of allOf that fails
// drops its annotations, so one bad member also makes every member that
// branch evaluated look "unevaluated". Those leaves are kept only when
// nothing else failed, which is exactly when they name unknown members.
func validatorIssues(doc any, err error) []Issue {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []Issue{{Path: "", Rule: schemaRulePrefix + "error", Message: err.Error()}}
	}
	var found, unevaluated []Issue
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if k, ok := e.ErrorKind.(*kind.PropertyNames); ok {
			// The validator's InstanceLocation for propertyNames is not
			// reliable (v6.0.3 reuses the slice), and only extension
			// objects constrain member names, so look the name up there.
			paths := extensionsHolding(doc, k.Property)
			if len(paths) == 0 {
				paths = []string{pointer("", append(slices.Clone(e.InstanceLocation), k.Property)...)}
			}
			for _, p := range paths {
				found = append(found, Issue{
					Path:    p,
					Rule:    schemaRulePrefix + "propertyNames",
					Message: fmt.Sprintf("extension name %q is neither a URI nor a domain followed by \"/\"", k.Property),
				})
			}
			return
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		path := pointer("", e.InstanceLocation...)
		if strings.HasSuffix(e.SchemaURL, "/unevaluatedProperties") {
			name := ""
			if n := len(e.InstanceLocation); n > 0 {
				name = e.InstanceLocation[n-1]
			}
			unevaluated = append(unevaluated, Issue{
				Path:    path,
				Rule:    schemaRulePrefix + "unevaluatedProperties",
				Message: fmt.Sprintf("unknown member %q", name),
			})
			return
		}
		keyword := "error"
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			keyword = kp[0]
		}
		msg := keyword + " failed"
		if u := e.BasicOutput(); u != nil && u.Error != nil {
			msg = u.Error.String()
		}
		found = append(found, Issue{Path: path, Rule: schemaRulePrefix + keyword, Message: msg})
	}
	walk(verr)
	if len(found) == 0 {
		found = unevaluated
	}
	if len(found) == 0 { // never report a failed validation as no issues
		found = []Issue{{Path: "", Rule: schemaRulePrefix + "error", Message: verr.Error()}}
	}
	slices.SortStableFunc(found, func(a, b Issue) int { return strings.Compare(a.Path, b.Path) })
	return slices.Compact(found)
}

// extensionsHolding returns the pointers of name inside every extensions
// object of a decoded message that has a member called name.
func extensionsHolding(doc any, name string) []string {
	var out []string
	look := func(obj any, at string) {
		if m, ok := obj.(map[string]any); ok {
			if ext, ok := m["extensions"].(map[string]any); ok {
				if _, ok := ext[name]; ok {
					out = append(out, pointer(at, "extensions", name))
				}
			}
		}
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	look(root, "")
	for _, k := range []string{"request", "decision", "resolution"} {
		look(root[k], "/"+k)
	}
	if snap, ok := root["snapshot"].(map[string]any); ok {
		if pending, ok := snap["pending"].([]any); ok {
			for i, r := range pending {
				look(r, index("/snapshot/pending", i))
			}
		}
	}
	return out
}
