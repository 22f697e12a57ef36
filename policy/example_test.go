package policy_test

import (
	"encoding/json"
	"fmt"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/policy"
)

func Example() {
	p, err := policy.Parse([]byte(`
roots:
  - iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w
tools:
  - match: read_file
    namespace: docs
    action: read
    resource: {arg: /path}
    cost: 100
  - match: "write_*"
    namespace: docs
    action: write
    resource: {arg: /path, prefix: /srv}
spend_store: spend.log
`), "/etc/delegateos")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.SpendStore)

	for _, call := range []struct{ tool, args string }{
		{"read_file", `{"path": "/project/a.md"}`},
		{"write_note", `{"path": "/notes/today.md", "text": "..."}`},
		{"get_time", ``},
		{"read_file", `{"file": "/project/a.md"}`},
	} {
		c, err := p.Map(call.tool, json.RawMessage(call.args))
		if err != nil {
			fmt.Println("deny:", err)
			continue
		}
		fmt.Printf("%s needs %s:%s:%s and costs %d\n", call.tool, c.Namespace, c.Action, c.Resource, c.Cost)
	}

	grant := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}}
	fmt.Println(p.Visible("read_file", grant), p.Visible("write_note", grant))
	// Output:
	// /etc/delegateos/spend.log
	// read_file needs docs:read:/project/a.md and costs 100
	// write_note needs docs:write:/srv/notes/today.md and costs 0
	// get_time needs mcp:get_time:* and costs 0
	// deny: the call cannot be mapped to a capability: tool "read_file": /path: missing
	// true false
}

func ExampleParse_errors() {
	_, err := policy.Parse([]byte(`
tools:
  - match: read_file
    namespace: docs
    action: read
    cost: -1
  - match: get_time
    namespace: clock
    acton: read
`), "")
	for _, e := range err.(policy.Errors) {
		fmt.Println(e)
	}
	// Output:
	// line 6: tools[0].cost: must be a non-negative integer (microcents) of at most 9007199254740991
	// line 7: tools[1]: action is required
	// line 9: tools[1].acton: unknown key; did you mean action? (known keys here: match, namespace, action, resource, cost, max_cost, rate, approval)
}

func ExamplePolicy_MapResource() {
	p, err := policy.Parse([]byte(`
resources:
  - match: "file:///srv/docs/*"     # one level: * stops at '/'
    namespace: docs
    action: read
    cost: 10
  - match: "file:///srv/archive/**" # any depth
    namespace: docs
    action: read-archive
    cost: 50
    max_cost: 500
prompts:
  - match: "review-*"
    namespace: prompts
    action: get
default_cost: 1
`), "")
	if err != nil {
		panic(err)
	}
	for _, uri := range []string{
		"file:///srv/docs/a.md",
		"file:///srv/docs/sub/b.md",
		"file:///srv/archive/2024/c.md",
		"file:///srv/docs/%2e%2e/secret",
	} {
		c, err := p.MapResource(uri)
		if err != nil {
			fmt.Println("deny:", err)
			continue
		}
		fmt.Printf("%s needs %s:%s:%s and costs %d (at most %d)\n", uri, c.Namespace, c.Action, c.Resource, c.Cost, c.MaxCost)
	}
	for _, name := range []string{"review-code", "summarize"} {
		c, _ := p.MapPrompt(name, nil)
		fmt.Printf("prompt %s needs %s:%s:%s\n", name, c.Namespace, c.Action, c.Resource)
	}

	grant := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "file:///srv/docs/*"}}
	fmt.Println(p.ResourceVisible("file:///srv/docs/a.md", grant),
		p.ResourceTemplateVisible("file:///srv/docs/{name}", grant),
		p.ResourceTemplateVisible("file:///srv/archive/{year}/{name}", grant))
	// Output:
	// file:///srv/docs/a.md needs docs:read:file:///srv/docs/a.md and costs 10 (at most 10)
	// file:///srv/docs/sub/b.md needs mcp-resource:read:file:///srv/docs/sub/b.md and costs 1 (at most 1)
	// file:///srv/archive/2024/c.md needs docs:read-archive:file:///srv/archive/2024/c.md and costs 50 (at most 500)
	// deny: the call cannot be mapped to a capability: the resource URI holds a percent-encoded '.', '/' or '\', which a server may decode into a path
	// prompt review-code needs prompts:get:review-code
	// prompt summarize needs mcp-prompt:get:summarize
	// true true false
}
