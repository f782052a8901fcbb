// Package handler executes the capability calls the gateway has admitted:
// step 7 of "One request through the runtime" (docs/architecture.md). After
// an ARSIA request has been verified, validated, authorized and, when its
// compliance profile demands it, approved through AAIS, the gateway hands
// the call to a Handler.
//
// # What is approved is what runs
//
// A Handler describes a call before it runs it (Describe returns a
// Descriptor: kind, resource, working directory, effects, risk). Action turns
// the call and its descriptor into the AAIS action a reviewer approves:
//
//	kind              Descriptor.Kind
//	name              Call.Capability
//	summary           Descriptor.Summary, or one written from the above
//	arguments         Call.Args, byte for byte (whitespace aside)
//	resource          Descriptor.Resource (omitted when "")
//	working_directory Descriptor.WorkingDirectory (omitted when "")
//	effects           Descriptor.Effects (always present)
//
// and returns it with its digest, which is what the AAIS request carries
// (risk comes from Descriptor.AAISRisk). Dispatch describes the call again
// immediately before running it, recomputes the digest and runs nothing when
// it differs from the approved one (ErrStale): changed arguments, a handler
// whose URL or command changed, a handler now describing the call
// differently all resolve as stale.
//
// Only what is in the action is bound. A handler's secrets (HTTP headers,
// a program's environment) are deliberately not part of it, so changing
// them does not invalidate approvals; nor does a program replaced on disk at
// the same path.
//
// # Built-in handlers
//
//   - Echo answers {"echo": ARGS}; kind "echo", risk low.
//   - HTTP POSTs the arguments to a configured URL and maps the answer;
//     kind "http.request", resource the URL, risk medium. Redirects are
//     never followed.
//   - Exec runs a configured program (argv, no shell) with the arguments on
//     stdin and an explicit environment (plus ExplanationFileEnv, and
//     ExplanationRequiredEnv when the profile asks for an explanation),
//     and reads a JSON object from its stdout; kind "process.exec",
//     resource the absolute program path, risk high. It is meant for
//     demos.
//   - MCP runs an ARSIA-carried MCP tools/call (payload type
//     arsiaprotocol.mcp/tool-call) on a configured MCP server, over stdio
//     or Streamable HTTP; kind "tool.call", resource the server, the whole
//     JSON-RPC object as arguments (so the digest covers tool and
//     arguments).
//   - A2A sends an ARSIA-carried A2A task (arsiaprotocol.a2a/task) to a
//     configured A2A agent and maps the task state to an ASC status; kind
//     "a2a.task".
//
// # ASC statuses
//
// Every error carries an ASC status in the tool_call scope (asc.FromError)
// with a retry contract saying what is known about side effects. The codes
// are the most specific the ASC 0.1 registry offers:
//
//	Situation                                         Code                          Retry contract
//	------------------------------------------------  ----------------------------  ------------------------------------
//	approved digest differs from the action (stale)   4001 FAILED_PRECONDITION      side effects none
//	arguments not one strict JSON object, bad name    4000 INVALID_REQUEST          -
//	descriptor AAIS cannot carry, result not object,  6001 INTERNAL_ERROR           -
//	  handler error without an ASC status
//	context ended before the request could leave      5004 TIMEOUT (deadline) or    retryable and safe, side effects none
//	                                                  3004 CANCELLED                (cancelled: side effects none)
//	context ended after the request may have reached  6005 RESULT_STATE_UNKNOWN     not retryable, unsafe, side effects
//	  the upstream (timeout or caller), task still                                  unknown: reconcile first (ASC §5)
//	  working, program killed on timeout
//
//	HTTP
//	2xx with one JSON object (204: {})                success
//	2xx, content type not JSON or body not an object  7005 INTEGRITY_CHECK_FAILED   side effects possible
//	2xx, body over MaxResponseBytes                   5002 RESOURCE_EXHAUSTED       side effects possible
//	3xx (never followed)                              4003 GUARDRAIL_BLOCKED        side effects possible
//	400, 405, 413, 415, 422 and other 4xx             4000 INVALID_REQUEST          side effects none
//	401, 403                                          4002 PERMISSION_DENIED        side effects none
//	404, 410                                          4006 NOT_FOUND                side effects none
//	409, 412                                          4005 CONFLICT                 side effects none
//	408                                               5004 TIMEOUT                  retryable, safe, side effects none
//	429                                               5001 RATE_LIMITED             retryable, safe, after Retry-After
//	501                                               4007 UNSUPPORTED_CAPABILITY   side effects none
//	502                                               5003 DEPENDENCY_UNAVAILABLE   retryable, unsafe, side effects unknown
//	503                                               5003 DEPENDENCY_UNAVAILABLE   retryable, safe, after Retry-After
//	504 (a gateway gave up after forwarding)          6005 RESULT_STATE_UNKNOWN     not retryable, unsafe, side effects unknown
//	500 and any other status                          5005 TOOL_EXECUTION_FAILED    retryable, unsafe, side effects unknown
//	connecting or TLS handshake failed                5003 DEPENDENCY_UNAVAILABLE   retryable, safe, side effects none
//	connection failed after connecting                5003 DEPENDENCY_UNAVAILABLE   retryable, unsafe, side effects unknown
//	no connection within Timeout (nothing sent)       5004 TIMEOUT                  retryable, safe, side effects none
//	sent, no answer (or body) within Timeout          6005 RESULT_STATE_UNKNOWN     not retryable, unsafe, side effects unknown
//
//	Exec
//	exit 0 with one JSON object on stdout             success
//	program could not be started                      5003 DEPENDENCY_UNAVAILABLE   retryable, safe, side effects none
//	context ended before the program started          3004 CANCELLED / 5004 TIMEOUT side effects none
//	non-zero exit or killed by a signal               5005 TOOL_EXECUTION_FAILED    side effects possible; stderr, sanitised
//	                                                                                and cut to 512 characters, in the message
//	stdout over MaxOutputBytes (program killed)       5002 RESOURCE_EXHAUSTED       side effects possible
//	stdout not one JSON object                        7005 INTEGRITY_CHECK_FAILED   side effects possible
//	still running after Timeout, or the caller's      6005 RESULT_STATE_UNKNOWN     not retryable, unsafe, side effects unknown
//	  context ended after it started (group killed)
//
//	MCP and A2A
//	tools/call or message sent, no answer in time     6005 RESULT_STATE_UNKNOWN     not retryable, unsafe, side effects unknown
//	A2A task still submitted/working at the deadline  6005 RESULT_STATE_UNKNOWN     not retryable, unsafe, side effects unknown
//	server not reached in time (nothing sent)         5004 TIMEOUT                  retryable, safe, side effects none
//
// Reasons for the less obvious choices:
//
//   - Stale is FAILED_PRECONDITION, not INTEGRITY_CHECK_FAILED: nothing the
//     caller sent failed a check; the approval no longer covers the action
//     in the current state, and the remedy ("after state repair") is a new
//     approval. It is a 4xxx, so nobody retries it as a transient failure.
//   - An upstream's 401/403 is PERMISSION_DENIED, not
//     AUTHENTICATION_REQUIRED: the credentials at fault are the gateway's,
//     and the calling agent cannot fix them by authenticating again.
//   - 429 and 503 mean the upstream refused before acting (RFC 6585,
//     RFC 9110 §15.6.4), so a retry is marked safe; 500 and 502 leave the
//     side effects unknown, so asc.DecideRetry answers ReconcileFirst.
//   - A call that timed out after it may have reached the upstream is 6005
//     RESULT_STATE_UNKNOWN, not 5004 TIMEOUT: ASC §5 says so, because
//     TIMEOUT only says a deadline passed and a sender would retry it.
//     "May have reached" is decided conservatively: for HTTP (the http
//     handler, A2A and Streamable HTTP MCP) a connection was obtained for
//     the request (net/http client trace), or no connection attempt was
//     seen at all; a stdio MCP server always has the call once it is
//     written; a program has it once started. Only a call whose time ran
//     out while connecting is a safe TIMEOUT.
//   - A 2xx whose body cannot be used is INTEGRITY_CHECK_FAILED (a schema
//     check on the output failed and the output is withheld) with side
//     effects possible: the upstream reported success, so it must not be
//     retried blindly.
//   - A redirect is GUARDRAIL_BLOCKED: a safety control (not sending the
//     approved arguments to an unapproved URL) stopped the call; after a
//     303 the upstream may already have acted.
//
// Error messages (message.developer) never quote an upstream's body; the
// only untrusted text quoted is an Exec program's stderr and an HTTP
// Location or Content-Type header, all sanitised (control and format
// characters removed, cut short). message.user is the registry's generic
// text.
package handler
