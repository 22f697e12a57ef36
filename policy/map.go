package policy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/delegateos/delegateos/dct"
)

// Call is what a request needs: the capability a token must grant for it
// and what it costs.
type Call struct {
	Namespace, Action, Resource string
	// Cost in microcents.
	Cost int64
	// MaxCost is what the proxy reserves for the call when the policy
	// honours upstream-reported cost (HonourUpstreamCost): the rule's
	// max_cost, or Cost when it sets none. A reported cost is capped at it.
	// It is never less than Cost.
	MaxCost int64
	// Rule is the index of the rule that decided in Tools, Resources or
	// Prompts (whichever was consulted), or -1 when none matched and the
	// default mapping applied.
	Rule int
	// Rate is the rule's rate limit; zero when it sets none.
	Rate Rate
}

// Map maps a tools/call — the tool's name and its raw arguments — to the
// capability it needs and its cost. A tool no rule matches needs
// mcp:<tool>:* at DefaultCost. The arguments are read only when the rule
// takes the resource from one; then they must be a JSON object holding a
// string at the rule's pointer.
//
// Errors wrap ErrUnmappable; the Call returned with one still names the rule,
// namespace, action and cost, so a denial can say what was requested.
func (p *Policy) Map(tool string, arguments json.RawMessage) (Call, error) {
	if tool == "" || len(tool) > MaxToolNameLen {
		return Call{Rule: -1}, fmt.Errorf("%w: a tool name must be 1 to %d bytes", ErrUnmappable, MaxToolNameLen)
	}
	i := firstRule(p.Tools, tool)
	if i < 0 {
		return Call{Namespace: DefaultNamespace, Action: tool, Resource: "*", Cost: p.DefaultCost, MaxCost: p.DefaultCost, Rule: -1}, nil
	}
	r := &p.Tools[i]
	c := p.ruleCall(r, i)
	if r.Resource.Arg == "" {
		c.Resource = r.Resource.Value
		return c, nil
	}
	return c, r.argResource(&c, i, "tool", tool, arguments)
}

// argResource sets c.Resource from the argument rule i (r) takes it from.
func (r *Rule) argResource(c *Call, i int, what, name string, arguments json.RawMessage) error {
	tokens := r.Resource.tokens
	if tokens == nil { // a Rule built in code
		var err error
		if tokens, err = parsePointer(r.Resource.Arg); err != nil {
			return fmt.Errorf("%w: rule %d: %v", ErrUnmappable, i, err)
		}
	}
	v, err := lookupString(arguments, tokens)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %v", ErrUnmappable, what, name, err)
	}
	c.Resource = r.Resource.Prefix + v
	return nil
}

// ruleCall is the capability, without its resource, and the costs of a
// call rule i decides.
func (p *Policy) ruleCall(r *Rule, i int) Call {
	c := Call{Namespace: r.Namespace, Action: r.Action, Cost: p.DefaultCost, Rule: i, Rate: r.Rate}
	if r.Cost != nil {
		c.Cost = *r.Cost
	}
	c.MaxCost = c.Cost
	if r.MaxCost != nil {
		// Parse refuses a max_cost below the cost; a rule built in code
		// with one still never reserves less than the call costs.
		c.MaxCost = max(*r.MaxCost, c.Cost)
	}
	return c
}

// firstRule is the index of the first rule that matches name, or -1.
func firstRule(rules []Rule, name string) int {
	for i := range rules {
		if rules[i].matches(name) {
			return i
		}
	}
	return -1
}

// matches reports whether the rule applies to name. Parse compiles only
// patterns with glob syntax; the others, and every rule built in code,
// match the exact name.
func (r *Rule) matches(name string) bool {
	if r.glob == nil {
		return r.Match == name
	}
	return strings.HasPrefix(name, r.prefix) && r.glob.MatchString(name)
}

// Visible reports whether a token granting caps could ever call tool; the
// proxy shows only visible tools in tools/list and denies calls to the
// others. For a rule that takes its resource from an argument, a grant of
// the rule's namespace and action on any resource makes the tool visible;
// otherwise a grant must cover the literal resource.
func (p *Policy) Visible(tool string, caps []dct.Capability) bool {
	if tool == "" || len(tool) > MaxToolNameLen {
		return false
	}
	ns, action, res, anyResource := DefaultNamespace, tool, "*", false
	if i := firstRule(p.Tools, tool); i >= 0 {
		r := &p.Tools[i]
		ns, action, res, anyResource = r.Namespace, r.Action, r.Resource.Value, r.Resource.Arg != ""
	}
	for _, c := range caps {
		if anyResource {
			// Judge namespace and action exactly as verification will.
			c.Resource = "*"
		}
		if c.Covers(ns, action, res) {
			return true
		}
	}
	return false
}
