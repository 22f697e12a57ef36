package policy

// TEMPORARY: replaced by the resources/prompts rules.

import (
	"strings"

	"github.com/delegateos/delegateos/dct"
)

const (
	ResourceNamespace = "mcp-resource"
	PromptNamespace   = "mcp-prompt"
)

func (p *Policy) MapResource(uri string) (Call, error) {
	return Call{Namespace: ResourceNamespace, Action: "read", Resource: uri, Cost: p.DefaultCost, MaxCost: p.DefaultCost, Rule: -1}, nil
}
func (p *Policy) ResourceVisible(uri string, caps []dct.Capability) bool {
	for _, c := range caps {
		if c.Covers(ResourceNamespace, "read", uri) {
			return true
		}
	}
	return false
}
func (p *Policy) ResourceTemplateVisible(t string, caps []dct.Capability) bool {
	if i := strings.IndexByte(t, '{'); i >= 0 {
		t = t[:i] + "x"
	}
	return p.ResourceVisible(t, caps)
}
func (p *Policy) MapPrompt(name string) (Call, error) {
	return Call{Namespace: PromptNamespace, Action: "get", Resource: name, Cost: p.DefaultCost, MaxCost: p.DefaultCost, Rule: -1}, nil
}
func (p *Policy) PromptVisible(name string, caps []dct.Capability) bool {
	for _, c := range caps {
		if c.Covers(PromptNamespace, "get", name) {
			return true
		}
	}
	return false
}
