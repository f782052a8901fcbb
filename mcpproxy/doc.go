// Package mcpproxy puts a policy and a human in front of an MCP server: it
// is the library behind custos mcp-proxy.
//
// A Proxy sits between an MCP host (the client) and the server it wraps,
// relays everything, and decides each tools/call first with its Policy
// (ParsePolicy, a YAML file of rules over tool names and arguments):
// allow forwards the call unchanged, deny answers an error result carrying
// the ASC PERMISSION_DENIED status, and require_approval records an AAIS
// approval request for exactly that call (tool name and canonical
// arguments, bound by their digest), waits for a reviewer, and forwards the
// call only when it was approved and still has the approved digest.
//
// Approvals are asked either of a local AAIS store or of a running custos
// serve over HTTP (remote.go). The package depends inward only: on aais,
// asc and jcs, and on the official MCP go-sdk for the protocol.
package mcpproxy
