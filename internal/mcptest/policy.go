package mcptest

import (
	"fmt"
	"strconv"
	"strings"
)

// Rule is one entry of a policy's tool map: calls of the tools Match
// matches need Namespace:Action on the resource Arg points to.
type Rule struct {
	Match, Namespace, Action string
	// Arg is a JSON pointer to the resource argument; "" means "*".
	Arg string
	// Cost is the rule's cost in microcents; -1 leaves it unset, so that
	// the policy's default cost applies.
	Cost int64
	// MaxCost is the rule's max_cost; 0 leaves it unset.
	MaxCost int64
	// Approval is the rule's approval as YAML ("required", "{above: 5}");
	// "" leaves it unset.
	Approval string
}

// DocRules map the docserver's document tools to docs:read and docs:write
// on their path argument; its other tools keep the default mcp:<tool>:*.
func DocRules() []Rule {
	return []Rule{
		{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: -1},
		{Match: "list_files", Namespace: "docs", Action: "read", Arg: "/path", Cost: -1},
		{Match: "search", Namespace: "docs", Action: "read", Arg: "/path", Cost: -1},
		{Match: "write_file", Namespace: "docs", Action: "write", Arg: "/path", Cost: -1},
	}
}

// Priced maps tool to mcp:<tool>:* at cost.
func Priced(tool string, cost int64) Rule {
	return Rule{Match: tool, Namespace: "mcp", Action: tool, Cost: cost}
}

// Policy is a policy file, written as YAML by YAML.
type Policy struct {
	Roots                []string
	Rules                []Rule
	DefaultCost          int64
	AllowUnauthenticated bool
	HonourUpstreamCost   bool
	RevocationList       string
	SpendStore           string
	MaxFrameBytes        int
	// Extra is YAML appended as it is (a workspace section, say).
	Extra string
}

// Policy is the usual policy: e.Root trusted, DocRules, then extra.
func (e *Env) Policy(extra ...Rule) *Policy {
	return &Policy{Roots: []string{e.Root.ID()}, Rules: append(DocRules(), extra...)}
}

// YAML renders p as a policy file.
func (p *Policy) YAML() string {
	var b strings.Builder
	q := strconv.Quote
	if len(p.Roots) > 0 {
		b.WriteString("roots:\n")
		for _, r := range p.Roots {
			fmt.Fprintf(&b, "  - %s\n", q(r))
		}
	}
	if len(p.Rules) > 0 {
		b.WriteString("tools:\n")
		for _, r := range p.Rules {
			fmt.Fprintf(&b, "  - match: %s\n    namespace: %s\n    action: %s\n", q(r.Match), q(r.Namespace), q(r.Action))
			if r.Arg != "" {
				fmt.Fprintf(&b, "    resource: {arg: %s}\n", q(r.Arg))
			}
			if r.Cost >= 0 {
				fmt.Fprintf(&b, "    cost: %d\n", r.Cost)
			}
			if r.MaxCost > 0 {
				fmt.Fprintf(&b, "    max_cost: %d\n", r.MaxCost)
			}
			if r.Approval != "" {
				fmt.Fprintf(&b, "    approval: %s\n", r.Approval)
			}
		}
	}
	fmt.Fprintf(&b, "default_cost: %d\n", p.DefaultCost)
	fmt.Fprintf(&b, "allow_unauthenticated: %v\n", p.AllowUnauthenticated)
	fmt.Fprintf(&b, "honour_upstream_cost: %v\n", p.HonourUpstreamCost)
	if p.RevocationList != "" {
		fmt.Fprintf(&b, "revocation_list: %s\n", q(p.RevocationList))
	}
	if p.SpendStore != "" {
		fmt.Fprintf(&b, "spend_store: %s\n", q(p.SpendStore))
	}
	if p.MaxFrameBytes > 0 {
		fmt.Fprintf(&b, "max_frame_bytes: %d\n", p.MaxFrameBytes)
	}
	b.WriteString(p.Extra)
	return b.String()
}
