package asc

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/custos-runtime/custos/jcs"
)

// MCPEnvelopeURIPrefix starts the uri of the embedded envelope resource.
// MCP requires a uri on every resource; ASC's example omits it. Custos uses
// the envelope's content digest: urn:agent-status:envelope:sha256:<hex>.
const MCPEnvelopeURIPrefix = "urn:agent-status:envelope:"

// MCPToolResult is the subset of an MCP CallToolResult the ASC binding uses.
// Tool execution failures stay successful JSON-RPC responses with isError
// set; unknown tools and malformed requests stay JSON-RPC errors and never
// reach this type.
type MCPToolResult struct {
	Content []MCPContent
	IsError bool
	Extra   map[string]any
}

// MCPContent is one content item.
type MCPContent struct {
	Type     string
	Text     string
	Resource *MCPResource
	Extra    map[string]any
}

// MCPResource is an embedded text resource.
type MCPResource struct {
	URI      string
	MIMEType string
	Text     string
	Extra    map[string]any
}

// IsToolError reports whether MCP's isError should be set: the status is a
// terminal failure of class 4xxx to 7xxx.
func IsToolError(s Status) bool { return s.Terminal && s.Code >= 4000 && s.Code <= 7999 }

// ToMCPToolResult renders e as an MCP tool result: a text item with the
// user-safe message (or the status name) and the full envelope as an embedded
// application/agent-status+json resource.
func ToMCPToolResult(e *Envelope) (*MCPToolResult, error) {
	body, err := Marshal(e)
	if err != nil {
		return nil, err
	}
	digest, err := jcs.Digest(body)
	if err != nil {
		return nil, err
	}
	text := e.Status.Name
	if e.Message != nil && e.Message.User != "" {
		text = e.Message.User
	}
	return &MCPToolResult{
		Content: []MCPContent{
			{Type: "text", Text: text},
			{Type: "resource", Resource: &MCPResource{URI: MCPEnvelopeURIPrefix + digest, MIMEType: MediaType, Text: string(body)}},
		},
		IsError: IsToolError(e.Status),
	}, nil
}

// MCPStatus is what FromMCPToolResult found. Exactly one of Envelope and
// Partial is set: Partial when the resource held only the compact
// {code, name, scope} form of ASC's example, which is not a full envelope
// (no spec_version, kind, terminal or occurred_at) and must not be treated as
// one.
type MCPStatus struct {
	Envelope *Envelope
	Partial  *Status
	IsError  bool
	// URI is the resource uri, "" when absent.
	URI string
}

// Complete reports whether a full envelope was found.
func (s *MCPStatus) Complete() bool { return s.Envelope != nil }

// Code returns the status code whichever form was found.
func (s *MCPStatus) Code() Code {
	if s.Envelope != nil {
		return s.Envelope.Status.Code
	}
	return s.Partial.Code
}

// FromMCPToolResult finds the agent-status resource in r and decodes it. A
// full envelope is parsed with Parse; a compact status is decoded and its
// code/name pair checked. Errors wrap ErrBinding, ErrMalformed or
// ErrNameMismatch.
func FromMCPToolResult(r *MCPToolResult) (*MCPStatus, error) {
	var res *MCPResource
	for _, c := range r.Content {
		if c.Type == "resource" && c.Resource != nil && mediaTypeIs(c.Resource.MIMEType, MediaType) {
			res = c.Resource
			break
		}
	}
	if res == nil {
		return nil, fmt.Errorf("%w: no %s resource in the tool result", ErrBinding, MediaType)
	}
	out := &MCPStatus{IsError: r.IsError, URI: res.URI}
	o, iss := decodeObject([]byte(res.Text))
	if o == nil {
		return nil, iss.err()
	}
	if _, full := o.m["status"]; full {
		env, err := Parse([]byte(res.Text))
		if err != nil {
			return nil, err
		}
		out.Envelope = env
		return out, nil
	}
	s := o.d.status(o, false)
	checkCodeName(iss, "", s.Code, s.Name)
	if err := iss.err(); err != nil {
		return nil, err
	}
	out.Partial = &s
	return out, nil
}

// ParseMCPToolResult decodes a CallToolResult strictly (see Parse).
func ParseMCPToolResult(data []byte) (*MCPToolResult, error) {
	o, iss := decodeObject(data)
	if o == nil {
		return nil, iss.err()
	}
	d := o.d
	r := &MCPToolResult{}
	r.IsError, _ = o.boolean("isError")
	if items, ok := o.array("content"); ok {
		r.Content = make([]MCPContent, 0, len(items))
		for i, item := range items {
			p := "/content/" + strconv.Itoa(i)
			im, ok := d.object(item, p)
			if !ok {
				continue
			}
			co := d.reader(im, p)
			c := MCPContent{Type: co.str("type"), Text: co.str("text")}
			if ro := co.child("resource"); ro != nil {
				c.Resource = &MCPResource{URI: ro.str("uri"), MIMEType: ro.str("mimeType"), Text: ro.str("text")}
				c.Resource.Extra = ro.rest()
			}
			c.Extra = co.rest()
			r.Content = append(r.Content, c)
		}
	}
	r.Extra = o.rest()
	if err := iss.err(); err != nil {
		return nil, err
	}
	return r, nil
}

// mediaTypeIs compares media types ignoring case and parameters.
func mediaTypeIs(got, want string) bool {
	got, _, _ = strings.Cut(got, ";")
	return strings.EqualFold(strings.TrimSpace(got), want)
}

// MarshalJSON implements json.Marshaler.
func (r MCPToolResult) MarshalJSON() ([]byte, error) {
	content := r.Content
	if content == nil {
		content = []MCPContent{}
	}
	return appendObject(nil, r.Extra, always("content", content), always("isError", r.IsError))
}

// MarshalJSON implements json.Marshaler.
func (c MCPContent) MarshalJSON() ([]byte, error) {
	return appendObject(nil, c.Extra,
		always("type", c.Type),
		optString("text", c.Text),
		optValue("resource", c.Resource, c.Resource != nil),
	)
}

// MarshalJSON implements json.Marshaler.
func (r MCPResource) MarshalJSON() ([]byte, error) {
	return appendObject(nil, r.Extra,
		optString("uri", r.URI),
		always("mimeType", r.MIMEType),
		optString("text", r.Text),
	)
}
