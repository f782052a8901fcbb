package arsia

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/custos-runtime/custos/internal/jsonx"
	"github.com/custos-runtime/custos/internal/limits"
	"github.com/custos-runtime/custos/jcs"
)

// Intent is the envelope's intent.
type Intent string

// The six intents.
const (
	IntentRequest          Intent = "request"
	IntentResponse         Intent = "response"
	IntentEvent            Intent = "event"
	IntentError            Intent = "error"
	IntentPendingApproval  Intent = "pending_approval"
	IntentApprovalDecision Intent = "approval_decision"
)

// Intents returns the six intents.
func Intents() []Intent {
	return []Intent{IntentRequest, IntentResponse, IntentEvent, IntentError, IntentPendingApproval, IntentApprovalDecision}
}

// Valid reports whether i is one of the six intents.
func (i Intent) Valid() bool { return slices.Contains(Intents(), i) }

// ContentField is the payload member the receiver processes for the intent
// (Core §4.4.7): args, result, data or error; "" for an unknown intent.
func (i Intent) ContentField() string {
	switch i {
	case IntentRequest, IntentPendingApproval:
		return "args"
	case IntentResponse, IntentApprovalDecision:
		return "result"
	case IntentEvent:
		return "data"
	case IntentError:
		return "error"
	}
	return ""
}

// Reserved payload types.
const (
	PayloadTypeMCPToolCall       = "arsiaprotocol.mcp/tool-call"
	PayloadTypeA2ATask           = "arsiaprotocol.a2a/task"
	PayloadTypeOversightPending  = "arsiaprotocol.oversight/pending"
	PayloadTypeOversightDecision = "arsiaprotocol.oversight/decision"
	PayloadTypeComplianceCheck   = "arsiaprotocol.compliance/check"
	// PayloadTypeError is the reference SDK's default type of an error
	// payload; the test vectors also use "arsiaprotocol.error".
	PayloadTypeError = errorPayloadTypeDefault
)

// DefaultMaxMessageBytes caps the UTF-8 wire JSON of an envelope (Core
// §4): 1 MiB.
const DefaultMaxMessageBytes = limits.MessageBytes

// Envelope is an ARSIA message (Core §4, arsia-message.schema.json).
//
// The struct is for building and reading well-formed envelopes. Signatures
// and validation work on the generic form (ParseEnvelope, Map): JCS of that
// form is what is signed. Conversion between the two is lossless: payload
// content stays raw JSON, compliance values keep json.Number, optional
// members keep the difference between absent and empty ([] stays [], false
// stays false), and unknown members are kept in Extra and written back.
type Envelope struct {
	V      string
	ID     string
	TS     string
	From   string
	To     string
	Intent Intent
	// CorrelationID, ExpiresAt and MinV are "" when absent.
	CorrelationID string
	ExpiresAt     string
	MinV          string
	// Capabilities is nil when absent; a non-nil empty slice is written
	// as [].
	Capabilities []string
	Idempotency  *Idempotency
	Context      *Context
	Payload      *Payload
	Security     *Security
	// Compliance is nil when absent. Values are generic JSON (numbers as
	// json.Number).
	Compliance map[string]any
	// Extra holds top-level members the protocol does not define. L1
	// rejects them; they are kept only so that nothing is silently lost.
	Extra map[string]any
}

// Idempotency is the envelope's idempotency member (Core §10).
type Idempotency struct {
	Key       string
	ExpiresAt string
	Extra     map[string]any
}

// Context carries W3C-trace-like context and the routing priority.
type Context struct {
	TraceID string // "" when absent
	SpanID  string // "" when absent
	Flags   *int
	Locale  *string
	// Priority is 0-10; routing defaults it to 5 when absent.
	Priority *int
	Extra    map[string]any
}

// Security is the signature block; it is outside the signed bytes.
type Security struct {
	Alg       string
	Kid       string
	Sig       string
	Encrypted *bool
	EncAlg    *string
	EncMethod *string
	Extra     map[string]any
}

// IsEncrypted reports whether security.encrypted is true.
func (s *Security) IsEncrypted() bool { return s != nil && s.Encrypted != nil && *s.Encrypted }

// Payload is the envelope payload: an object with a type and one content
// member, or, when the envelope is encrypted, a compact JWE string.
type Payload struct {
	// JWE, when not empty, is the whole payload (a compact JWE) and the
	// other fields are unused.
	JWE string

	Type    string
	Version string // "" when absent
	// The content members stay raw JSON (nil when absent), so that numbers,
	// false and empty values survive exactly.
	Args        json.RawMessage
	Result      json.RawMessage
	Data        json.RawMessage
	Error       json.RawMessage
	Explanation json.RawMessage
	Extra       map[string]any
}

// Content returns the raw content member named by the intent (Core
// §4.4.7), or nil.
func (p *Payload) Content(i Intent) json.RawMessage {
	if p == nil {
		return nil
	}
	switch i.ContentField() {
	case "args":
		return p.Args
	case "result":
		return p.Result
	case "data":
		return p.Data
	case "error":
		return p.Error
	}
	return nil
}

// ParseEnvelope decodes an envelope into its generic form, strictly (package
// jcs): duplicate member names, invalid UTF-8, lone surrogates,
// non-interoperable numbers and more than DefaultMaxMessageBytes or 64
// levels are refused. The result must be a JSON object. Errors are *Error
// with code invalid_request (or payload_too_large), wrapping both
// ErrInvalidEnvelope and the jcs error.
func ParseEnvelope(data []byte) (map[string]any, error) {
	opts := &jcs.Options{MaxSize: DefaultMaxMessageBytes}
	v, err := opts.Decode(data)
	if err != nil {
		code := CodeInvalidRequest
		desc := "The message is not valid JSON."
		if errors.Is(err, jcs.ErrSize) {
			code = CodePayloadTooLarge
			desc = "The message exceeds the maximum accepted size."
		}
		return nil, &Error{Code: code, Description: desc, Err: fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Code: "invalid_envelope_type", Description: "The message is not a JSON object.", Err: ErrInvalidEnvelope}
	}
	return m, nil
}

// UnmarshalJSON decodes strictly (see ParseEnvelope) and converts with
// EnvelopeFromMap.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	v, err := jcs.Decode(data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: not a JSON object", ErrInvalidEnvelope)
	}
	env, err := EnvelopeFromMap(m)
	if err != nil {
		return err
	}
	*e = *env
	return nil
}

// MarshalJSON writes the envelope. Map keys come out sorted; the signature
// does not depend on member order (it is computed over JCS).
func (e Envelope) MarshalJSON() ([]byte, error) {
	m, err := e.toMap()
	if err != nil {
		return nil, err
	}
	return encodeJSON(m)
}

// Map returns the generic form of the envelope (what ParseEnvelope would
// return for its JSON), for validation and signing.
func (e *Envelope) Map() (map[string]any, error) {
	data, err := e.MarshalJSON()
	if err != nil {
		return nil, err
	}
	v, err := jcs.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	return v.(map[string]any), nil
}

// encodeJSON encodes without HTML escaping and without the trailing newline.
func encodeJSON(v any) ([]byte, error) { return jsonx.Marshal(v) }

func (e Envelope) toMap() (map[string]any, error) {
	m := make(map[string]any, 16+len(e.Extra))
	for k, v := range e.Extra {
		m[k] = v
	}
	m["v"] = e.V
	m["id"] = e.ID
	m["ts"] = e.TS
	m["from"] = e.From
	m["to"] = e.To
	m["intent"] = string(e.Intent)
	putString(m, "correlation_id", e.CorrelationID)
	putString(m, "expires_at", e.ExpiresAt)
	putString(m, "min_v", e.MinV)
	if e.Capabilities != nil {
		m["capabilities"] = slices.Clone(e.Capabilities)
	}
	if i := e.Idempotency; i != nil {
		o := cloneExtra(i.Extra)
		o["key"] = i.Key
		o["expires_at"] = i.ExpiresAt
		m["idempotency"] = o
	}
	if c := e.Context; c != nil {
		o := cloneExtra(c.Extra)
		putString(o, "trace_id", c.TraceID)
		putString(o, "span_id", c.SpanID)
		if c.Flags != nil {
			o["flags"] = *c.Flags
		}
		if c.Locale != nil {
			o["locale"] = *c.Locale
		}
		if c.Priority != nil {
			o["priority"] = *c.Priority
		}
		m["context"] = o
	}
	if p := e.Payload; p != nil {
		if p.JWE != "" {
			m["payload"] = p.JWE
		} else {
			o := cloneExtra(p.Extra)
			o["type"] = p.Type
			putString(o, "version", p.Version)
			for _, f := range []struct {
				name string
				raw  json.RawMessage
			}{{"args", p.Args}, {"result", p.Result}, {"data", p.Data}, {"error", p.Error}, {"explanation", p.Explanation}} {
				if f.raw == nil {
					continue
				}
				if !json.Valid(f.raw) {
					return nil, fmt.Errorf("%w: payload.%s is not valid JSON", ErrInvalidEnvelope, f.name)
				}
				o[f.name] = f.raw
			}
			m["payload"] = o
		}
	}
	if s := e.Security; s != nil {
		o := cloneExtra(s.Extra)
		o["alg"] = s.Alg
		o["kid"] = s.Kid
		o["sig"] = s.Sig
		if s.Encrypted != nil {
			o["encrypted"] = *s.Encrypted
		}
		if s.EncAlg != nil {
			o["enc_alg"] = *s.EncAlg
		}
		if s.EncMethod != nil {
			o["enc_method"] = *s.EncMethod
		}
		m["security"] = o
	}
	if e.Compliance != nil {
		m["compliance"] = e.Compliance
	}
	return m, nil
}

func putString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func cloneExtra(extra map[string]any) map[string]any {
	out := make(map[string]any, len(extra)+8)
	maps.Copy(out, extra)
	return out
}

// EnvelopeFromMap converts the generic form to an Envelope. It fails
// (ErrInvalidEnvelope) when a member has the wrong JSON type, when v, id,
// ts, from, to or intent is missing, or when correlation_id, expires_at,
// min_v, trace_id, span_id or payload.version is present but empty (which
// the struct could not write back). It does not validate otherwise: run
// ValidateSemantic (and L1) on the map.
func EnvelopeFromMap(m map[string]any) (*Envelope, error) {
	r := mapReader{}
	e := &Envelope{}
	rest := maps.Clone(m)
	take := func(k string) (any, bool) {
		v, ok := rest[k]
		delete(rest, k)
		return v, ok
	}
	e.V = r.requiredString(take, "v")
	e.ID = r.requiredString(take, "id")
	e.TS = r.requiredString(take, "ts")
	e.From = r.requiredString(take, "from")
	e.To = r.requiredString(take, "to")
	e.Intent = Intent(r.requiredString(take, "intent"))
	e.CorrelationID = r.optionalString(take, "correlation_id")
	e.ExpiresAt = r.optionalString(take, "expires_at")
	e.MinV = r.optionalString(take, "min_v")
	if v, ok := take("capabilities"); ok {
		caps, isList := stringsOf(v)
		if !isList {
			r.fail("capabilities must be an array of strings")
		}
		if caps == nil {
			caps = []string{}
		}
		e.Capabilities = caps
	}
	if v, ok := take("idempotency"); ok {
		o, isObj := objectOf(v)
		if !isObj {
			r.fail("idempotency must be an object")
		} else {
			o = maps.Clone(o)
			t := func(k string) (any, bool) { v, ok := o[k]; delete(o, k); return v, ok }
			e.Idempotency = &Idempotency{Key: r.requiredString(t, "idempotency.key"), ExpiresAt: r.requiredString(t, "idempotency.expires_at")}
			e.Idempotency.Extra = nilIfEmpty(o)
		}
	}
	if v, ok := take("context"); ok {
		o, isObj := objectOf(v)
		if !isObj {
			r.fail("context must be an object")
		} else {
			o = maps.Clone(o)
			t := func(k string) (any, bool) { v, ok := o[k]; delete(o, k); return v, ok }
			c := &Context{}
			c.TraceID = r.optionalString(t, "context.trace_id")
			c.SpanID = r.optionalString(t, "context.span_id")
			c.Flags = r.optionalInt(t, "context.flags")
			c.Locale = r.optionalStringPtr(t, "context.locale")
			c.Priority = r.optionalInt(t, "context.priority")
			c.Extra = nilIfEmpty(o)
			e.Context = c
		}
	}
	if v, ok := take("payload"); ok {
		e.Payload = r.payload(v)
	}
	if v, ok := take("security"); ok {
		o, isObj := objectOf(v)
		if !isObj {
			r.fail("security must be an object")
		} else {
			o = maps.Clone(o)
			t := func(k string) (any, bool) { v, ok := o[k]; delete(o, k); return v, ok }
			s := &Security{}
			s.Alg = r.requiredString(t, "security.alg")
			s.Kid = r.requiredString(t, "security.kid")
			s.Sig = r.requiredString(t, "security.sig")
			if v, ok := t("encrypted"); ok {
				b, isBool := v.(bool)
				if !isBool {
					r.fail("security.encrypted must be a boolean")
				}
				s.Encrypted = &b
			}
			s.EncAlg = r.optionalStringPtr(t, "security.enc_alg")
			s.EncMethod = r.optionalStringPtr(t, "security.enc_method")
			s.Extra = nilIfEmpty(o)
			e.Security = s
		}
	}
	if v, ok := take("compliance"); ok {
		o, isObj := objectOf(v)
		if !isObj {
			r.fail("compliance must be an object")
		}
		e.Compliance = maps.Clone(o)
		if e.Compliance == nil {
			e.Compliance = map[string]any{}
		}
	}
	e.Extra = nilIfEmpty(rest)
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}

func nilIfEmpty(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// mapReader records the first conversion problem.
type mapReader struct{ err error }

func (r *mapReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrInvalidEnvelope, fmt.Sprintf(format, args...))
	}
}

func lastName(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[i+1:]
		}
	}
	return name
}

func (r *mapReader) requiredString(take func(string) (any, bool), name string) string {
	v, ok := take(lastName(name))
	if !ok {
		r.fail("%s is missing", name)
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		r.fail("%s must be a string", name)
	}
	return s
}

func (r *mapReader) optionalString(take func(string) (any, bool), name string) string {
	v, ok := take(lastName(name))
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		r.fail("%s must be a string", name)
	case s == "":
		r.fail("%s is present but empty", name)
	}
	return s
}

func (r *mapReader) optionalStringPtr(take func(string) (any, bool), name string) *string {
	v, ok := take(lastName(name))
	if !ok {
		return nil
	}
	s, isStr := v.(string)
	if !isStr {
		r.fail("%s must be a string", name)
	}
	return &s
}

func (r *mapReader) optionalInt(take func(string) (any, bool), name string) *int {
	v, ok := take(lastName(name))
	if !ok {
		return nil
	}
	n, isInt := integerOf(v)
	if !isInt || n < -1<<31 || n > 1<<31-1 {
		r.fail("%s must be an integer", name)
		return nil
	}
	if num, isNum := v.(json.Number); isNum && string(num) != strconv.Itoa(n) {
		// 5.0 or 5e0 would come back as 5: same value, same JCS bytes,
		// but refuse rather than rewrite what the sender wrote.
		r.fail("%s must be written as a plain integer", name)
		return nil
	}
	return &n
}

func (r *mapReader) payload(v any) *Payload {
	if s, isStr := v.(string); isStr {
		if s == "" {
			r.fail("payload is an empty string")
			return nil
		}
		return &Payload{JWE: s}
	}
	o, isObj := objectOf(v)
	if !isObj {
		r.fail("payload must be an object or a JWE string")
		return nil
	}
	o = maps.Clone(o)
	t := func(k string) (any, bool) { v, ok := o[k]; delete(o, k); return v, ok }
	p := &Payload{}
	p.Type = r.requiredString(t, "payload.type")
	p.Version = r.optionalString(t, "payload.version")
	for _, f := range []struct {
		name string
		dst  *json.RawMessage
	}{{"args", &p.Args}, {"result", &p.Result}, {"data", &p.Data}, {"error", &p.Error}, {"explanation", &p.Explanation}} {
		if c, ok := t(f.name); ok {
			raw, err := rawJSON(c)
			if err != nil {
				r.fail("payload.%s: %v", f.name, err)
			}
			*f.dst = raw
		}
	}
	p.Extra = nilIfEmpty(o)
	return p
}

// rawJSON encodes a generic value; json.Number literals are kept as written.
func rawJSON(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, errors.New("invalid raw JSON")
		}
		return slices.Clone(raw), nil
	}
	b, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}
