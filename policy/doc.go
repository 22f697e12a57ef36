// Package policy reads the proxy's policy file and maps MCP requests — tool
// calls, resource reads and prompts — to the capabilities a Delegation
// Capability Token must grant for them.
//
// A policy file is YAML. Every key is optional; an empty file is the same as
// Default. It has three maps, each an ordered list of rules in which the
// first rule whose match fits decides:
//
//   - tools, matched against a tools/call's tool name. A rule gives the
//     namespace, the action, where the resource comes from — a literal, or
//     a string found by a JSON pointer (RFC 6901) in the call's arguments —
//     and the cost. A tool no rule matches needs mcp:<tool name>:*.
//   - resources, matched against a resource URI (resources/read,
//     resources/subscribe, a completion/complete referring to a resource).
//     A rule gives the namespace, the action and the cost; the capability's
//     resource is always the URI itself. A URI no rule matches needs
//     mcp-resource:read:<URI>.
//   - prompts, matched against a prompt's name (prompts/get, a
//     completion/complete referring to a prompt). A rule gives the
//     namespace, the action, the cost and a literal resource, which
//     defaults to the prompt's name. A prompt no rule matches needs
//     mcp-prompt:get:<name>.
//
// What no rule maps costs the default cost, as does a rule without a cost.
// When the policy honours costs the upstream reports, a rule's max_cost
// caps them (Call.MaxCost); it must be at least the rule's cost, which is
// the cap when it is not set.
//
// A match is an exact name or URI, or a glob: * and ** any run of
// characters, ? one character, [abc] or [a-z] one of those characters and
// [!abc] or [!a-z] one other, {a,b} one of the comma-separated globs, \c
// the character c. In tool and prompt globs * matches any text. In
// resource globs '/' separates segments: *, ? and classes never match '/',
// only ** does, so "file:///srv/*" matches file:///srv/a but not
// file:///srv/a/b. Query strings and fragments are ordinary text:
// "file:///srv/*" also matches file:///srv/a?x=1, whose capability names
// the whole URI. Globs are translated to anchored regular expressions, so
// matching takes linear time.
//
// Each default namespace belongs to its kind: Parse refuses a tool rule in
// mcp-resource or mcp-prompt, a resource rule in mcp or mcp-prompt and a
// prompt rule in mcp or mcp-resource, so that a grant in one of them never
// covers another kind of request by accident.
//
// Parsing is strict: unknown keys, duplicate keys, values of the wrong type
// or out of range, YAML aliases, a max_cost below its rule's cost and rules
// that can never apply — an earlier rule always matches first, or an exact
// resource match is a URI MapResource refuses — are all errors, each naming
// the line it is on. Parse reports every problem it finds as Errors.
//
// Mapping fails closed: when a rule takes its resource from an argument that
// is missing, is not a string, or cannot be read unambiguously (the member
// appears twice), Map returns an error wrapping ErrUnmappable and the caller
// denies the call. MapResource refuses, the same way, a URI a server might
// read as another path than the one matched: one with a control character,
// a backslash, a "." or ".." segment, a percent-encoded '/' or '\', or a
// percent-encoded unreserved character ('.' among them).
//
// Visible, ResourceVisible, ResourceTemplateVisible and PromptVisible say
// whether a token's capabilities could use a tool, resource, resource
// template or prompt; the proxy lists only those.
//
// A Policy is not changed by the Map and Visible methods and is safe for
// concurrent use once built.
package policy
