package policy

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// MethodRule lets a vendor extension method through the gate: a request
// (or notification is never one: only requests are gated) whose method is
// exactly Method needs Namespace:Action:Resource and costs Cost. A method
// no rule names, and MCP's own, keep their handling: an unknown one is
// refused (-32601).
type MethodRule struct {
	Method, Namespace, Action string
	// Resource is the capability's resource; "" means the method's name.
	Resource string
	// Cost in microcents; nil means the policy's DefaultCost.
	Cost *int64
	// Line is where the rule starts in the policy file.
	Line int
}

// MapMethod maps a vendor extension method to the capability it needs
// and its cost; ok is false when no rule of Methods names it.
func (p *Policy) MapMethod(method string) (c Call, ok bool) {
	for i := range p.Methods {
		r := &p.Methods[i]
		if r.Method != method {
			continue
		}
		c = Call{Namespace: r.Namespace, Action: r.Action, Resource: r.Resource, Cost: p.DefaultCost, Rule: -1}
		if c.Resource == "" {
			c.Resource = method
		}
		if r.Cost != nil {
			c.Cost = *r.Cost
		}
		c.MaxCost = c.Cost
		return c, true
	}
	return Call{Rule: -1}, false
}

// mcpMethods are the methods MCP defines (up to 2026-07-28) and the
// proxy's own: a methods rule cannot name one, whose handling is the
// proxy's.
var mcpMethods = []string{"initialize", "ping", "server/discover", "logging/setLevel", "tools/call", "tools/list",
	"resources/read", "resources/list", "resources/templates/list", "resources/subscribe", "resources/unsubscribe",
	"prompts/get", "prompts/list", "completion/complete", "subscriptions/listen", "tasks/get", "tasks/result",
	"tasks/list", "tasks/cancel", "sampling/createMessage", "elicitation/create", "roots/list"}

var methodRuleKeys = []string{"method", "namespace", "action", "resource", "cost"}

// methods parses the methods section.
func (ps *parser) methods(n *yaml.Node, key string) []MethodRule {
	items := ps.seq(n, key, "vendor methods")
	if len(items) > MaxRules {
		ps.errorf(n, key, "more than %d rules", MaxRules)
		return nil
	}
	var out []MethodRule
	seen := map[string]bool{}
	for i, item := range items {
		k := fmt.Sprintf("%s[%d]", key, i)
		if item.Kind != yaml.MappingNode {
			ps.errorf(item, k, "a method rule must be a mapping with %s", strings.Join(methodRuleKeys, ", "))
			continue
		}
		before := len(ps.errs)
		r := MethodRule{Line: item.Line}
		present := ps.mapping(item, k, methodRuleKeys, func(f string, v *yaml.Node) {
			vk := k + "." + f
			switch f {
			case "method":
				r.Method = ps.methodName(v, vk)
				if r.Method != "" && seen[r.Method] {
					ps.errorf(v, vk, "%s is named by an earlier rule", r.Method)
				}
				seen[r.Method] = true
			case "namespace":
				r.Namespace = ps.name(v, vk)
				for _, dns := range defaultNamespaces {
					if r.Namespace == dns {
						ps.errorf(v, vk, "%s is the namespace of what no rule maps; a method rule must use another, so that a grant in it covers only what it was meant for", dns)
					}
				}
			case "action":
				r.Action = ps.name(v, vk)
			case "resource":
				if s, ok := ps.str(v, vk); ok {
					if s == "" {
						ps.errorf(v, vk, `must not be empty; leave it out for the method's name`)
					}
					r.Resource = s
				}
			case "cost":
				if c, ok := ps.cost(v, vk); ok {
					r.Cost = &c
				}
			}
		})
		for _, req := range []string{"method", "namespace", "action"} {
			if !present[req] {
				ps.errorf(item, k, "%s is required", req)
			}
		}
		if len(ps.errs) == before {
			out = append(out, r)
		}
	}
	return out
}

// methodName reads a methods rule's method: an exact name that is not
// MCP's nor the proxy's own.
func (ps *parser) methodName(n *yaml.Node, key string) string {
	s, ok := ps.str(n, key)
	switch {
	case !ok:
		return ""
	case s == "":
		ps.errorf(n, key, "must not be empty")
		return ""
	case len(s) > MaxMatchLen:
		ps.errorf(n, key, "longer than %d bytes", MaxMatchLen)
		return ""
	case strings.HasPrefix(s, "notifications/"):
		ps.errorf(n, key, "%s is a notification: only requests are gated, and the proxy forwards no notification MCP does not define", s)
		return ""
	case strings.HasPrefix(s, "delegateos/"):
		ps.errorf(n, key, "%s is in the proxy's own namespace (delegateos/)", s)
		return ""
	}
	for _, m := range mcpMethods {
		if s == m {
			ps.errorf(n, key, "%s is an MCP method, which the proxy handles itself; methods lists vendor extension methods", s)
			return ""
		}
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "" || strings.Trim(seg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			ps.errorf(n, key, "must be segments of letters, digits, '_' and '-' separated by '/' (as acme/search): receipts name it as the action mcp.acme.search")
			return ""
		}
	}
	return s
}
