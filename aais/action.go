package aais

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/custos-runtime/custos/jcs"
)

// Action is the exact action a request asks about. It is the raw JSON
// object that was received (or built), compacted, and nothing else: its
// digest is always computed over those bytes and it is written back as
// those bytes, so no field can be dropped or reordered by re-encoding a Go
// struct. The accessors decode a read-only view for presenters and
// policies.
//
// The zero Action is empty and cannot be marshalled.
type Action struct {
	raw  json.RawMessage
	view actionView
	// digest is the action digest of raw, computed once when the Action
	// is made ("" if that failed: Digest then reports why). raw never
	// changes, so neither does its digest.
	digest string
}

// actionView mirrors the schema's action object for reading only.
type actionView struct {
	Kind             string          `json:"kind"`
	Name             string          `json:"name"`
	Summary          string          `json:"summary"`
	Arguments        json.RawMessage `json:"arguments"`
	Resource         string          `json:"resource"`
	WorkingDirectory string          `json:"working_directory"`
	Effects          []string        `json:"effects"`
	Presentation     *Presentation   `json:"presentation"`
}

// NewAction makes an Action from v, which must be a json.RawMessage holding
// one JSON object, or an already decoded generic value (map[string]any with
// the shapes jcs.CanonicalizeValue accepts). Raw JSON is decoded strictly
// and kept as given (compacted); a generic value is kept in its RFC 8785
// canonical form. Go structs and other typed values are refused with
// ErrUnsupportedValue. The action is checked against the AAIS action
// schema and the binding_hint rule.
func NewAction(v any) (Action, error) {
	return (*Options)(nil).NewAction(v)
}

// NewAction is the package-level NewAction under o's limits.
func (o *Options) NewAction(v any) (Action, error) {
	var raw []byte
	switch v := v.(type) {
	case json.RawMessage:
		if _, err := o.jcs().Decode(v); err != nil {
			return Action{}, &ValidationError{
				Issues: []Issue{{Path: jcsPath(err), Rule: RuleJSON, Message: err.Error()}},
				cause:  err,
			}
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return Action{}, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		raw = buf.Bytes()
	case []byte:
		return Action{}, fmt.Errorf("%w: []byte is ambiguous; pass json.RawMessage", ErrUnsupportedValue)
	default:
		c, err := o.jcs().AppendValue(nil, v)
		if err != nil {
			if errors.Is(err, jcs.ErrUnsupportedType) {
				return Action{}, fmt.Errorf("%w: %T: %w", ErrUnsupportedValue, v, err)
			}
			return Action{}, &ValidationError{
				Issues: []Issue{{Path: jcsPath(err), Rule: RuleJSON, Message: err.Error()}},
				cause:  err,
			}
		}
		raw = c
	}
	if err := checkActionSchema(raw); err != nil {
		return Action{}, err
	}
	a, err := actionFromRaw(raw)
	if err != nil {
		return Action{}, err
	}
	var is issues
	checkPresentation(&is, "", a.view.Presentation)
	if err := is.err(); err != nil {
		return Action{}, err
	}
	return a, nil
}

// actionFromRaw wraps raw JSON that has already been decoded strictly and
// validated against the action schema.
func actionFromRaw(raw []byte) (Action, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return Action{}, fmt.Errorf("%w: action: %v", ErrMalformed, err)
	}
	a := Action{raw: buf.Bytes()}
	if err := json.Unmarshal(a.raw, &a.view); err != nil {
		return Action{}, fmt.Errorf("%w: action: %v", ErrMalformed, err)
	}
	a.digest, _ = ActionDigest(a.raw)
	return a, nil
}

// ActionDigest returns "sha256:" + lowercase hex(SHA-256(JCS(raw))) for a
// raw JSON action object, decoding it strictly first. An authority uses it
// at dispatch to recompute the digest of the action it is about to run.
func ActionDigest(raw []byte) (string, error) {
	return (*Options)(nil).ActionDigest(raw)
}

// ActionDigest is the package-level ActionDigest under o's limits.
func (o *Options) ActionDigest(raw []byte) (string, error) {
	i := 0
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	if i == len(raw) || raw[i] != '{' {
		return "", fmt.Errorf("%w: an action is a JSON object", ErrInvalid)
	}
	d, err := o.jcs().Digest(raw)
	if err != nil {
		return "", &ValidationError{
			Issues: []Issue{{Path: jcsPath(err), Rule: RuleJSON, Message: err.Error()}},
			cause:  err,
		}
	}
	return d, nil
}

// Digest recomputes the action digest from the raw JSON.
func (a Action) Digest() (string, error) {
	if len(a.raw) == 0 {
		return "", fmt.Errorf("%w: empty action", ErrInvalid)
	}
	if a.digest != "" {
		return a.digest, nil
	}
	return ActionDigest(a.raw)
}

// IsZero reports whether a holds no action.
func (a Action) IsZero() bool { return len(a.raw) == 0 }

// Raw returns a copy of the action's JSON.
func (a Action) Raw() json.RawMessage { return bytes.Clone(a.raw) }

// Equal reports whether a and b are the same JSON bytes.
func (a Action) Equal(b Action) bool { return bytes.Equal(a.raw, b.raw) }

// Kind is the namespaced category ("process.exec", "tool.call", ...).
func (a Action) Kind() string { return a.view.Kind }

// Name is the implementation's action or tool name.
func (a Action) Name() string { return a.view.Name }

// Summary is the concise description. It is a presentation aid written by
// the requester and is not trusted.
func (a Action) Summary() string { return a.view.Summary }

// Arguments returns a copy of the exact arguments object.
func (a Action) Arguments() json.RawMessage { return bytes.Clone(a.view.Arguments) }

// Resource returns the resource, "" when absent.
func (a Action) Resource() string { return a.view.Resource }

// WorkingDirectory returns the working directory, "" when absent.
func (a Action) WorkingDirectory() string { return a.view.WorkingDirectory }

// Effects returns a copy of the advisory expected effects: nil when the
// member is absent, a non-nil empty slice when it is [].
func (a Action) Effects() []string {
	if a.view.Effects == nil {
		return nil
	}
	return append(make([]string, 0, len(a.view.Effects)), a.view.Effects...)
}

// Presentation returns a copy of the presentation member, nil when absent.
func (a Action) Presentation() *Presentation {
	if a.view.Presentation == nil {
		return nil
	}
	p := *a.view.Presentation
	if p.Redacted != nil {
		r := *p.Redacted
		p.Redacted = &r
	}
	return &p
}

// Redacted reports whether the action says a runtime value is an opaque
// reference that the presenter must show as redacted.
func (a Action) Redacted() bool {
	p := a.view.Presentation
	return p != nil && p.Redacted != nil && *p.Redacted
}

// MarshalJSON writes the raw JSON; an empty Action is an error.
func (a Action) MarshalJSON() ([]byte, error) {
	if len(a.raw) == 0 {
		return nil, fmt.Errorf("%w: empty action", ErrInvalid)
	}
	return slices.Clone(a.raw), nil
}

// jcsPath returns the JSON Pointer a *jcs.Error names, or "".
func jcsPath(err error) string {
	var je *jcs.Error
	if errors.As(err, &je) {
		return je.Path
	}
	return ""
}
