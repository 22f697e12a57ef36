// Package proxy is the MCP side of delegateos: a stdio relay between an MCP
// client and an upstream MCP server that passes every message through
// unchanged except tools/list (filtered to what the session's token grants)
// and tools/call (decided by the Gate: token verified, revocation checked,
// budget reserved, spend recorded, refusals returned as the JSON-RPC error
// of DelegateOS §11.2).
//
// Frames that are not intercepted are written byte for byte; request IDs,
// progress, cancellation, server-initiated requests and unknown methods all
// cross untouched.
package proxy
