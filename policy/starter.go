package policy

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// StarterTool is what WriteStarter needs to know of one upstream tool.
type StarterTool struct {
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema for its arguments.
	InputSchema json.RawMessage
	// ReadOnly is the tool's readOnlyHint annotation: it says it changes
	// nothing. Without the annotation a tool may change things, as MCP
	// defines.
	ReadOnly bool
}

// The actions of a starter policy's rules: a token granting
// mcp:read:* may call every tool that says it only reads.
const (
	StarterReadAction  = "read"
	StarterWriteAction = "write"
)

// Starter describes the starter policy WriteStarter writes.
type Starter struct {
	// Command is the upstream command line, named in the header comment.
	Command []string
	// Namespace of every rule; "" means DefaultNamespace.
	Namespace string
	Tools     []StarterTool
}

// ResourceArgs are the argument names a starter rule takes its resource
// from, in order of preference, when the tool's input schema declares one
// of them as a string.
var ResourceArgs = []string{"path", "file", "filename", "uri", "url"}

// WriteStarter writes a commented policy file with one rule per tool, for an
// operator to edit: namespace Namespace, action the tool's name, resource
// the first of ResourceArgs the tool takes as a string argument, else "*".
// The file passes Parse. Tools whose names cannot be written as a rule are
// listed in comments instead.
func WriteStarter(w io.Writer, s Starter) error {
	ns := s.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	if err := checkName(ns); err != nil {
		return fmt.Errorf("namespace %q: %v", ns, err)
	}
	if ns == ResourceNamespace || ns == PromptNamespace {
		return fmt.Errorf("namespace %q: it is the namespace of the %s no rule maps, not of tools", ns,
			map[string]string{ResourceNamespace: "resources", PromptNamespace: "prompts"}[ns])
	}
	var b strings.Builder
	b.WriteString(starterHeader(s.Command))
	if len(s.Tools) == 0 {
		b.WriteString("tools: [] # the upstream listed no tools\n")
	} else {
		b.WriteString("tools:\n")
	}
	for _, g := range starterGroups(&b, s.Tools) {
		writeStarterRule(&b, ns, g)
	}
	b.WriteString(starterFooter)
	_, err := io.WriteString(w, b.String())
	return err
}

func starterHeader(command []string) string {
	return `# delegateos policy for the MCP server started by:
#   ` + comment(strings.Join(command, " "), 200) + `
# Written by 'delegateos policy init'. Edit it, check it with
# 'delegateos policy check FILE' and use it with
# 'delegateos proxy --policy FILE -- COMMAND...'.

# Trusted root principals: principal IDs or did:key. A token is accepted
# only if one of them issued it. The proxy's --root flag adds more.
roots: []

# The tool map. Each tools/call needs a capability NAMESPACE:ACTION:RESOURCE
# that the caller's token grants, and costs microcents (1000000 = 1 dollar)
# charged to the token's budget. Rules are tried in order and the first
# whose match fits the tool's name decides:
#   match      an exact tool name or a glob: * ? [abc] {a,b}
#   namespace  and action: the capability's namespace and action
#   resource   a literal ("*" needs a grant on every resource), or
#              {arg: /pointer, prefix: "..."}: the string argument the JSON
#              pointer (RFC 6901) names, after the optional prefix, e.g.
#              {arg: /path} turns read_file {"path": "/a/b"} into /a/b
#   cost       microcents per call; without it, default_cost
#   max_cost   with honour_upstream_cost, the most a call may be charged
#              when the upstream reports its cost (at least cost)
# The tools are grouped by what they say of themselves: those annotated
# readOnlyHint are one rule (action read), the others another (action
# write), each split by the argument that names their resource. The
# annotation is the server's own claim: check that each read-only tool
# only reads. Give a tool a rule of its own, above these, to grant or
# price it apart.
# A tool no rule matches needs mcp:<tool name>:* and costs default_cost.
# Only tools the token could call are shown to the client.
`
}

var starterFooter = `
# The resource map. resources/read and resources/subscribe need a
# capability whose resource is the URI itself; the first rule whose match
# fits the URI gives its namespace, action, cost and max_cost. A match is
# an exact URI or a glob in which * and ? stop at '/' and ** does not:
#   - match: "file:///srv/docs/**"
#     namespace: docs
#     action: read
#     cost: 10
# A URI no rule matches needs mcp-resource:read:<URI>, e.g. a grant of
# mcp-resource:read:file:///srv/docs/** reads everything under it.
# URIs with a backslash, "." or ".." segments, a percent-encoded '/' or
# '\' or a percent-encoded letter, digit, '-', '.', '_' or '~' are refused.
# Only resources and templates the token could read are listed.
resources: []

# The prompt map. prompts/get needs the capability of the first rule whose
# match (an exact name or a glob) fits the prompt's name; its resource is
# the rule's literal resource, or else the prompt's name. A prompt no rule
# matches needs mcp-prompt:get:<name>. completion/complete needs what the
# prompt or resource it completes for needs.
prompts: []

# The cost of a call whose rule sets no cost, or that no rule matches.
default_cost: 0

# Forward calls that carry no token at all. false: deny them (fail closed).
allow_unauthenticated: false

# Trust the cost the upstream reports in a result's
# _meta["` + UpstreamCostKey + `"] instead of the rule's cost.
honour_upstream_cost: false

# The revocation list file written by 'delegateos revoke'; the proxy
# re-reads it when it changes. Relative paths are relative to this file.
# Empty: no revocation list.
revocation_list: ""

# The file that keeps spend per delegation across restarts; relative to
# this file. A redis:// URL shares it with a fleet of proxies (as may
# revocation_list). Empty: not set.
spend_store: ""

# The largest JSON-RPC message accepted, in bytes (1024 to 1073741824).
max_frame_bytes: ` + fmt.Sprint(DefaultMaxFrameBytes) + `

log:
  # The log file, relative to this file; empty: standard error.
  file: ""
  # debug, info, warn or error.
  level: info
`

// starterGroup is the tools one starter rule covers: all read-only or all
// not, with the same resource argument ("" for none).
type starterGroup struct {
	readOnly bool
	arg      string
	tools    []StarterTool
	match    string
}

// starterGroups sorts the tools into rules, read-only ones first, in the
// order the server listed them; a tool that cannot be matched is named in
// a comment on b instead.
func starterGroups(b *strings.Builder, tools []StarterTool) []*starterGroup {
	var groups []*starterGroup
	seen := map[string]bool{}
	for _, t := range tools {
		name := t.Name
		var skip string
		switch {
		case name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0):
			skip = "its name is empty, not UTF-8 or contains NUL"
		case seen[name]:
			skip = "listed twice; the first rule covers it"
		case len(quoteMeta(name))+2 > MaxMatchLen:
			skip = "its name is too long for a rule"
		}
		seen[name] = true
		if skip != "" {
			fmt.Fprintf(b, "  # tool %s: no rule, %s\n", comment(name, 80), skip)
			continue
		}
		arg := resourceArg(t.InputSchema)
		var g *starterGroup
		for _, c := range groups {
			// A rule's match grows by the name and a comma; a full one
			// leaves the next tool to a rule of its own.
			if c.readOnly == t.ReadOnly && c.arg == arg && len(c.match)+len(braceItem(name))+1 <= MaxMatchLen-2 {
				g = c
			}
		}
		if g == nil {
			g = &starterGroup{readOnly: t.ReadOnly, arg: arg}
			groups = append(groups, g)
		}
		if g.match != "" {
			g.match += ","
		}
		g.match += braceItem(name)
		g.tools = append(g.tools, t)
	}
	slices.SortStableFunc(groups, func(a, b *starterGroup) int {
		switch {
		case a.readOnly == b.readOnly:
			return 0
		case a.readOnly:
			return -1
		}
		return 1
	})
	return groups
}

// braceItem is a tool name as one alternative of a {a,b} glob: its glob
// syntax and its commas escaped.
func braceItem(name string) string {
	return strings.ReplaceAll(quoteMeta(name), ",", `\,`)
}

func writeStarterRule(b *strings.Builder, ns string, g *starterGroup) {
	action, what := StarterWriteAction, "tools that may change things (no readOnlyHint)"
	if g.readOnly {
		action, what = StarterReadAction, "read-only tools (readOnlyHint)"
	}
	fmt.Fprintf(b, "  # %s: a token granting %s:%s:... calls them all\n", what, comment(ns, 80), action)
	for _, t := range g.tools {
		if d := comment(t.Description, 100); d != "" {
			fmt.Fprintf(b, "  #   %s: %s\n", comment(t.Name, 80), d)
		} else {
			fmt.Fprintf(b, "  #   %s\n", comment(t.Name, 80))
		}
	}
	match := quoteMeta(g.tools[0].Name)
	if len(g.tools) > 1 {
		match = "{" + g.match + "}"
	}
	fmt.Fprintf(b, "  - match: %s\n    namespace: %s\n    action: %s\n", quote(match), quote(ns), quote(action))
	if g.arg != "" {
		fmt.Fprintf(b, "    # the resource is the %q argument: the first string argument in the\n", g.arg)
		fmt.Fprintf(b, "    # tools' input schemas named %s\n", orList(ResourceArgs))
		fmt.Fprintf(b, "    resource: {arg: %s}\n", quote("/"+escapeToken(g.arg)))
	} else {
		fmt.Fprintf(b, "    resource: \"*\"\n")
	}
}

// resourceArg is the first of ResourceArgs the schema declares as a string
// property, or "".
func resourceArg(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	for _, name := range ResourceArgs {
		prop, ok := s.Properties[name]
		if !ok {
			continue
		}
		var one string
		var many []string
		if json.Unmarshal(prop.Type, &one) == nil && one == "string" ||
			json.Unmarshal(prop.Type, &many) == nil && slices.Contains(many, "string") {
			return name
		}
	}
	return ""
}

var plainScalar = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_./-]*$`)

// yamlKeywords are plain scalars YAML 1.1 or 1.2 readers take as something
// other than a string.
var yamlKeywords = []string{"true", "false", "yes", "no", "on", "off", "y", "n", "null"}

// quote writes s as a YAML scalar: plain when that is unambiguous, else
// double-quoted with every character a YAML reader might refuse escaped.
func quote(s string) string {
	if plainScalar.MatchString(s) && !slices.Contains(yamlKeywords, strings.ToLower(s)) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == utf8.RuneError || r == '\uFEFF' || !unicode.IsPrint(r) && r != ' ':
			if r > 0xFFFF {
				fmt.Fprintf(&b, `\U%08X`, r)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// comment makes s safe for one comment line: printable, one line, at most
// max runes.
func comment(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r == '\uFEFF' || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	return s
}

// orList writes "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
