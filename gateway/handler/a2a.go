package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// DefaultA2APoll is how often a task still submitted or working is polled
// (GetTask) until its call's timeout, when a configuration says 0.
const DefaultA2APoll = 500 * time.Millisecond

// A2AConfig configures the a2a handler.
type A2AConfig struct {
	// URL is the A2A agent's JSON-RPC endpoint (http or https, no user
	// information or fragment). It is the action's resource.
	URL string
	// Headers are sent with every request, typically credentials. They are
	// not part of the action.
	Headers http.Header
	// Client sends the HTTP requests; nil means a client on
	// http.DefaultTransport. Redirects are never followed.
	Client *http.Client
	// Timeout bounds one call, polling included. 0 means DefaultTimeout.
	Timeout time.Duration
	// Poll is the interval between GetTask calls while the task is
	// submitted or working. 0 means DefaultA2APoll.
	Poll time.Duration
	// MaxResponseBytes caps the result (as JSON). 0 means
	// DefaultMaxResponseBytes; at most MaxResponseBytesLimit.
	MaxResponseBytes int64
}

// A2A is the built-in handler for ARSIA requests carrying an A2A request
// (payload type arsiaprotocol.a2a/task): it sends the message to the
// configured agent with the a2a-go client and maps the task's state to an
// ASC status (ASC A2A binding):
//
//	A2A task state           ASC status
//	completed                success; the result is {"task": TASK}
//	(a message, no task)     success; the result is {"message": MESSAGE}
//	failed                   5005 TOOL_EXECUTION_FAILED
//	canceled                 3004 CANCELLED
//	rejected                 4002 PERMISSION_DENIED
//	input-required           3001 HUMAN_INPUT_REQUIRED
//	auth-required            3003 AUTHENTICATION_REQUIRED
//	submitted, working       polled until the timeout, then 6005
//	                         RESULT_STATE_UNKNOWN (side effects unknown)
//
// Accepted JSON-RPC methods: SendMessage (A2A 1.0), and the older
// message/send (0.2/0.3) and tasks/send (0.1), whose message is read in
// their shape (role "user", parts with kind or type) and sent as A2A 1.0.
type A2A struct {
	url     string
	host    string
	timeout time.Duration
	poll    time.Duration
	max     int64
	client  *a2aclient.Client
}

// NewA2A validates cfg and returns the handler. Nothing is contacted.
// Errors wrap ErrConfig.
func NewA2A(cfg A2AConfig) (*A2A, error) {
	u, err := checkUpstreamURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: a2a: %v", ErrConfig, err)
	}
	h := &A2A{url: u.String(), host: u.Host, poll: cfg.Poll}
	if h.timeout, h.max, err = handlerLimits(cfg.Timeout, cfg.MaxResponseBytes, "MaxResponseBytes"); err != nil {
		return nil, err
	}
	if h.poll < 0 {
		return nil, fmt.Errorf("%w: a2a: negative poll interval", ErrConfig)
	}
	if h.poll == 0 {
		h.poll = DefaultA2APoll
	}
	hc, err := mcpHTTPClient(cfg.Client, cfg.Headers)
	if err != nil {
		return nil, err
	}
	iface := a2a.NewAgentInterface(h.url, a2a.TransportProtocolJSONRPC)
	h.client, err = a2aclient.NewFromEndpoints(context.Background(), []*a2a.AgentInterface{iface},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return nil, fmt.Errorf("%w: a2a: %v", ErrConfig, err)
	}
	return h, nil
}

// a2aSend is a parsed A2A send request.
type a2aSend struct {
	method string
	req    *a2a.SendMessageRequest
}

// parseA2A reads the JSON-RPC request strictly and converts it to an A2A
// 1.0 SendMessageRequest. messageID fills a legacy message without one.
func parseA2A(args json.RawMessage, messageID string) (a2aSend, error) {
	r, err := parseRPC(args, "a2a")
	if err != nil {
		return a2aSend{}, err
	}
	s := a2aSend{method: r.Method, req: &a2a.SendMessageRequest{}}
	switch r.Method {
	case "SendMessage":
		raw, _ := json.Marshal(r.Params)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(s.req); err != nil {
			return a2aSend{}, callError("a2a: params: %v", err)
		}
	case "message/send", "tasks/send":
		if err := legacySend(r.Method, r.Params, s.req, messageID); err != nil {
			return a2aSend{}, err
		}
	default:
		return a2aSend{}, callError("a2a: method %q is not supported; only SendMessage, message/send and tasks/send", r.Method)
	}
	m := s.req.Message
	switch {
	case m == nil:
		return a2aSend{}, callError("a2a: params.message is required")
	case len(m.Parts) == 0:
		return a2aSend{}, callError("a2a: params.message.parts must not be empty")
	case m.Role != a2a.MessageRoleUser && m.Role != a2a.MessageRoleAgent:
		return a2aSend{}, callError("a2a: params.message.role %q is not ROLE_USER or ROLE_AGENT", m.Role)
	case m.ID == "":
		return a2aSend{}, callError("a2a: params.message.messageId is required")
	}
	for i, p := range m.Parts {
		if p == nil || p.Content == nil {
			return a2aSend{}, callError("a2a: params.message.parts[%d] has no content", i)
		}
	}
	return s, nil
}

// legacySend reads message/send (A2A 0.2/0.3: {message, configuration,
// metadata}) and tasks/send (A2A 0.1: {id, sessionId, message, metadata,
// historyLength, acceptedOutputModes}). tasks/send's id (the client's task
// id, which A2A 1.0 no longer lets a client choose) travels in the request
// metadata as "a2a_task_id"; its sessionId becomes the message's contextId.
func legacySend(method string, params map[string]json.RawMessage, req *a2a.SendMessageRequest, messageID string) error {
	var legacyTaskID, sessionID string
	for k, v := range params {
		switch k {
		case "message":
			m, err := legacyMessage(v, messageID)
			if err != nil {
				return err
			}
			req.Message = m
		case "metadata":
			if err := json.Unmarshal(v, &req.Metadata); err != nil || req.Metadata == nil {
				return callError("a2a: params.metadata must be an object")
			}
		case "configuration":
			if method != "message/send" {
				return callError("a2a: params: unknown member %q", k)
			}
			var c struct {
				AcceptedOutputModes []string `json:"acceptedOutputModes"`
				HistoryLength       *int     `json:"historyLength"`
				Blocking            *bool    `json:"blocking"`
			}
			if err := strictUnmarshal(v, &c); err != nil {
				return callError("a2a: params.configuration: %v", err)
			}
			req.Config = &a2a.SendMessageConfig{AcceptedOutputModes: c.AcceptedOutputModes, HistoryLength: c.HistoryLength,
				ReturnImmediately: c.Blocking != nil && !*c.Blocking}
		case "id", "sessionId":
			var s string
			if method != "tasks/send" || json.Unmarshal(v, &s) != nil || s == "" {
				return callError("a2a: params.%s must be a non-empty string (tasks/send only)", k)
			}
			if k == "id" {
				legacyTaskID = s
			} else {
				sessionID = s
			}
		case "historyLength", "acceptedOutputModes":
			if method != "tasks/send" {
				return callError("a2a: params: unknown member %q", k)
			}
			if req.Config == nil {
				req.Config = &a2a.SendMessageConfig{}
			}
			var err error
			if k == "historyLength" {
				err = json.Unmarshal(v, &req.Config.HistoryLength)
			} else {
				err = json.Unmarshal(v, &req.Config.AcceptedOutputModes)
			}
			if err != nil {
				return callError("a2a: params.%s: %v", k, err)
			}
		default:
			return callError("a2a: params: unknown member %q", k)
		}
	}
	if req.Message != nil {
		if sessionID != "" && req.Message.ContextID == "" {
			req.Message.ContextID = sessionID
		}
		if legacyTaskID != "" {
			if req.Metadata == nil {
				req.Metadata = map[string]any{}
			}
			req.Metadata["a2a_task_id"] = legacyTaskID
		}
	}
	return nil
}

// legacyMessage converts an A2A 0.x message: role "user"/"agent", parts
// {"kind"|"type": "text"|"data"|"file", ...}.
func legacyMessage(raw json.RawMessage, messageID string) (*a2a.Message, error) {
	var w struct {
		Role      string            `json:"role"`
		Parts     []json.RawMessage `json:"parts"`
		MessageID string            `json:"messageId"`
		ContextID string            `json:"contextId"`
		TaskID    string            `json:"taskId"`
		Metadata  map[string]any    `json:"metadata"`
		Kind      string            `json:"kind"`
		RefTasks  []string          `json:"referenceTaskIds"`
		Exts      []string          `json:"extensions"`
	}
	if err := strictUnmarshal(raw, &w); err != nil {
		return nil, callError("a2a: params.message: %v", err)
	}
	if w.Kind != "" && w.Kind != "message" {
		return nil, callError("a2a: params.message.kind %q is not \"message\"", w.Kind)
	}
	m := &a2a.Message{ID: w.MessageID, ContextID: w.ContextID, TaskID: a2a.TaskID(w.TaskID), Metadata: w.Metadata, Extensions: w.Exts}
	if m.ID == "" {
		m.ID = messageID
	}
	for _, t := range w.RefTasks {
		m.ReferenceTasks = append(m.ReferenceTasks, a2a.TaskID(t))
	}
	switch strings.ToLower(w.Role) {
	case "user", "role_user":
		m.Role = a2a.MessageRoleUser
	case "agent", "role_agent":
		m.Role = a2a.MessageRoleAgent
	default:
		return nil, callError("a2a: params.message.role %q is not user or agent", w.Role)
	}
	for i, pr := range w.Parts {
		p, err := legacyPart(pr)
		if err != nil {
			return nil, callError("a2a: params.message.parts[%d]: %v", i, err)
		}
		m.Parts = append(m.Parts, p)
	}
	return m, nil
}

func legacyPart(raw json.RawMessage) (*a2a.Part, error) {
	var w struct {
		Kind     string          `json:"kind"`
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		Data     json.RawMessage `json:"data"`
		File     json.RawMessage `json:"file"`
		Metadata map[string]any  `json:"metadata"`
	}
	if err := strictUnmarshal(raw, &w); err != nil {
		return nil, err
	}
	kind := w.Kind
	if kind == "" {
		kind = w.Type
	}
	var p *a2a.Part
	switch {
	case kind == "text" && w.Text != nil && w.Data == nil && w.File == nil:
		p = a2a.NewTextPart(*w.Text)
	case kind == "data" && w.Data != nil && w.Text == nil && w.File == nil:
		var v any
		if err := json.Unmarshal(w.Data, &v); err != nil {
			return nil, err
		}
		p = a2a.NewDataPart(v)
	case kind == "file" && w.File != nil && w.Text == nil && w.Data == nil:
		var f struct {
			URI      string `json:"uri"`
			Bytes    []byte `json:"bytes"`
			MimeType string `json:"mimeType"`
			Name     string `json:"name"`
		}
		if err := strictUnmarshal(w.File, &f); err != nil {
			return nil, fmt.Errorf("file: %v", err)
		}
		switch {
		case f.URI != "" && f.Bytes == nil:
			p = a2a.NewFileURLPart(a2a.URL(f.URI), f.MimeType)
		case f.URI == "" && f.Bytes != nil:
			p = a2a.NewRawPart(f.Bytes)
			p.MediaType = f.MimeType
		default:
			return nil, errors.New("file: exactly one of uri and bytes is required")
		}
		p.Filename = f.Name
	default:
		return nil, fmt.Errorf("kind %q with the wrong members; want text, data or file", kind)
	}
	p.Metadata = w.Metadata
	return p, nil
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Describe says that the call sends the message to the configured agent.
func (h *A2A) Describe(c Call) (Descriptor, error) {
	s, err := parseA2A(c.Args, c.MessageID)
	if err != nil {
		return Descriptor{}, err
	}
	return Descriptor{
		Kind:     "a2a.task",
		Summary:  truncateRunes(fmt.Sprintf("Sends an A2A %s to the agent at %s", s.method, h.url), maxSummaryLen),
		Resource: h.url,
		Effects: []string{
			"Sends params.message to the A2A agent at " + h.host + ", which may act on it",
		},
		Risk:        aais.RiskMedium,
		RiskReasons: []string{"Delegates a task to another agent, which may act on it"},
	}, nil
}

// Execute sends the message and maps the answer (see A2A).
func (h *A2A) Execute(ctx context.Context, c Call) (Result, error) {
	s, err := parseA2A(c.Args, c.MessageID)
	if err != nil {
		return Result{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	sctx, sent := withSendTrace(tctx)
	res, err := h.client.SendMessage(sctx, s.req)
	if err != nil {
		if tctx.Err() != nil {
			if sent.mayHaveSent() {
				return Result{}, unanswered(ctx, "a2a: the message was sent and no answer came within %s", h.timeout)
			}
			return Result{}, notSent(ctx, "a2a: the message could not be sent within %s", h.timeout)
		}
		if !sent.mayHaveSent() {
			return Result{}, fail(asc.DependencyUnavailable, nothingHappened, "a2a: %s", sanitize([]byte(err.Error())))
		}
		return Result{}, h.sendFailed(ctx, tctx, err)
	}
	switch r := res.(type) {
	case *a2a.Message:
		out, err := h.result(c, map[string]any{"message": r})
		setExplanation(&out, r.Metadata)
		return out, err
	case *a2a.Task:
		return h.task(ctx, tctx, c, r)
	}
	return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "a2a: the agent answered %T, neither a task nor a message", res)
}

// task waits for a task still submitted or working, then maps its state.
func (h *A2A) task(ctx, tctx context.Context, c Call, t *a2a.Task) (Result, error) {
	for t.Status.State == a2a.TaskStateSubmitted || t.Status.State == a2a.TaskStateWorking {
		timer := time.NewTimer(h.poll)
		select {
		case <-tctx.Done():
			timer.Stop()
			// The agent has the task and may be acting on it: the outcome
			// is unknown, not merely late (ASC §5).
			return Result{}, unanswered(ctx, "a2a: task %s still %s when the wait ended after %s", sanitize([]byte(t.ID)), t.Status.State, h.timeout)
		case <-timer.C:
		}
		nt, err := h.client.GetTask(tctx, &a2a.GetTaskRequest{ID: t.ID})
		if err != nil {
			if tctx.Err() != nil {
				continue // reported by the select above
			}
			return Result{}, h.sendFailed(ctx, tctx, err)
		}
		t = nt
	}
	why := statusText(t)
	switch t.Status.State {
	case a2a.TaskStateCompleted:
		out, err := h.result(c, map[string]any{"task": t})
		metas := []map[string]any{t.Metadata}
		if t.Status.Message != nil {
			metas = append(metas, t.Status.Message.Metadata)
		}
		for _, a := range slices.Backward(t.Artifacts) {
			if a != nil {
				metas = append(metas, a.Metadata)
			}
		}
		setExplanation(&out, metas...)
		return out, err
	case a2a.TaskStateFailed:
		return Result{}, fail(asc.ToolExecutionFailed, mayHaveRun, "a2a: task %s failed%s", sanitize([]byte(t.ID)), why)
	case a2a.TaskStateCanceled:
		return Result{}, fail(asc.Cancelled, mayHaveRun, "a2a: task %s was canceled%s", sanitize([]byte(t.ID)), why)
	case a2a.TaskStateRejected:
		return Result{}, fail(asc.PermissionDenied, refused, "a2a: task %s was rejected%s", sanitize([]byte(t.ID)), why)
	case a2a.TaskStateInputRequired:
		return Result{}, fail(asc.HumanInputRequired, mayHaveRun, "a2a: task %s requires input%s", sanitize([]byte(t.ID)), why)
	case a2a.TaskStateAuthRequired:
		return Result{}, fail(asc.AuthenticationRequired, mayHaveRun, "a2a: task %s requires authentication%s", sanitize([]byte(t.ID)), why)
	}
	return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "a2a: task %s has the unknown state %q", sanitize([]byte(t.ID)), sanitize([]byte(t.Status.State)))
}

// statusText quotes the text of a task's status message, sanitised.
func statusText(t *a2a.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	for _, p := range t.Status.Message.Parts {
		if p != nil {
			if s := p.Text(); s != "" {
				return ": " + sanitize([]byte(s))
			}
		}
	}
	return ""
}

func (h *A2A) result(c Call, v any) (Result, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "a2a: the answer cannot be encoded: %v", err)
	}
	if int64(len(data)) > h.max {
		return Result{}, fail(asc.ResourceExhausted, mayHaveRun, "a2a: the answer exceeds %d bytes", h.max)
	}
	if err := checkObject(data, int(h.max)); err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "a2a: the answer is not one strict JSON object: %v", err)
	}
	return Result{PayloadType: c.PayloadType, Data: json.RawMessage(data)}, nil
}

// sendFailed maps an error of SendMessage or GetTask.
func (h *A2A) sendFailed(ctx, tctx context.Context, err error) error {
	switch {
	case tctx.Err() != nil:
		// Only reached once the message was sent (Execute sorts out the
		// rest), or while polling a task the agent has.
		return unanswered(ctx, "a2a: no answer within %s", h.timeout)
	case errors.Is(err, a2a.ErrTaskNotFound):
		return fail(asc.NotFound, refused, "a2a: task not found")
	case errors.Is(err, a2a.ErrUnauthenticated), errors.Is(err, a2a.ErrUnauthorized):
		return fail(asc.PermissionDenied, refused, "a2a: the agent refused the gateway's credentials")
	case errors.Is(err, a2a.ErrParseError), errors.Is(err, a2a.ErrInvalidRequest), errors.Is(err, a2a.ErrInvalidParams):
		return fail(asc.InvalidRequest, refused, "a2a: the agent refused the request: %s", sanitize([]byte(err.Error())))
	case errors.Is(err, a2a.ErrMethodNotFound), errors.Is(err, a2a.ErrUnsupportedOperation),
		errors.Is(err, a2a.ErrVersionNotSupported), errors.Is(err, a2a.ErrUnsupportedContentType),
		errors.Is(err, a2a.ErrExtensionSupportRequired):
		return fail(asc.UnsupportedCapability, refused, "a2a: %s", sanitize([]byte(err.Error())))
	case errors.Is(err, a2a.ErrInvalidAgentResponse):
		return fail(asc.IntegrityCheckFailed, mayHaveRun, "a2a: %s", sanitize([]byte(err.Error())))
	case errors.Is(err, a2a.ErrInternalError), errors.Is(err, a2a.ErrServerError):
		return fail(asc.ToolExecutionFailed, unknown, "a2a: the agent failed: %s", sanitize([]byte(err.Error())))
	case notConnected(err):
		return fail(asc.DependencyUnavailable, nothingHappened, "a2a: %s", sanitize([]byte(err.Error())))
	}
	return fail(asc.DependencyUnavailable, unknown, "a2a: %s", sanitize([]byte(err.Error())))
}

// setExplanation gives res the first ARSIA explanation found under
// ExplanationMeta in metas (an A2A message's, task's or artifact's
// metadata); Run and Dispatch check it.
func setExplanation(res *Result, metas ...map[string]any) {
	for _, m := range metas {
		e, ok := m[ExplanationMeta]
		if !ok {
			continue
		}
		data, err := json.Marshal(e)
		if err != nil {
			res.ExplanationIssue = err.Error()
			return
		}
		res.Explanation = data
		return
	}
}
