// Package mcpdef reads the definitions an MCP server lists (tools,
// prompts, resource templates) down to the members a model reads, in
// canonical form (RFC 8785), and hashes them: what a pin approves, and what
// the proxy compares with it.
//
// The members kept are, for a tool: name, title, description, inputSchema,
// outputSchema, annotations; for a prompt: name, title, description,
// arguments; for a resource template: uriTemplate, name, title,
// description, mimeType, annotations. Every other member (_meta, icons,
// execution, ...) is left out, and a member whose value is null counts as
// absent, as clients read it. An entry is refused when any object in it
// gives a member twice, when it is not valid UTF-8, or when a member at its
// top level differs from a kept one only in letter case (a client decoding
// with Go's encoding/json would read "Description" as the description the
// hash left out).
package mcpdef
