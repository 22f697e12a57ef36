// Package policy reads the proxy's policy file and maps MCP tool calls to the
// capabilities a Delegation Capability Token must grant for them.
//
// A policy file is YAML. Every key is optional; an empty file is the same as
// Default. The tool map is an ordered list of rules: the first rule whose
// match (an exact tool name or a glob) fits the tool decides the namespace,
// the action, where the resource comes from — a literal, or a string found
// by a JSON pointer (RFC 6901) in the call's arguments — and the cost. A tool
// no rule matches needs the capability mcp:<tool name>:* at the default
// cost.
//
// Parsing is strict: unknown keys, duplicate keys, values of the wrong type
// or out of range, YAML aliases and rules that can never apply because an
// earlier rule always matches first are all errors, each naming the line it
// is on. Parse reports every problem it finds as Errors.
//
// Mapping fails closed: when a rule takes its resource from an argument that
// is missing, is not a string, or cannot be read unambiguously (the member
// appears twice), Map returns an error wrapping ErrUnmappable and the caller
// denies the call.
//
// A Policy is not changed by Map or Visible and is safe for concurrent use
// once built.
package policy
