package policy

import (
	"strings"
	"testing"
)

func TestParseMethods(t *testing.T) {
	p, err := Parse([]byte("default_cost: 3\nmethods:\n  - {method: acme/search, namespace: acme, action: search}\n  - {method: acme/put, namespace: acme, action: put, resource: store, cost: 9}\n"), "/")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := p.MapMethod("acme/search"); !ok || c != (Call{Namespace: "acme", Action: "search", Resource: "acme/search", Cost: 3, MaxCost: 3, Rule: -1}) {
		t.Errorf("acme/search: %+v %v", c, ok)
	}
	if c, ok := p.MapMethod("acme/put"); !ok || c.Resource != "store" || c.Cost != 9 {
		t.Errorf("acme/put: %+v %v", c, ok)
	}
	if _, ok := p.MapMethod("acme/other"); ok {
		t.Error("a method no rule names is mapped")
	}
	for in, want := range map[string]string{
		"methods:\n  - {method: tools/call, namespace: a, action: b}\n":                                      "MCP method",
		"methods:\n  - {method: notifications/x, namespace: a, action: b}\n":                                 "notification",
		"methods:\n  - {method: delegateos/x, namespace: a, action: b}\n":                                    "proxy's own",
		"methods:\n  - {method: a/b, namespace: mcp, action: b}\n":                                           "namespace of what no rule maps",
		"methods:\n  - {method: a/b, namespace: a}\n":                                                        "action is required",
		"methods:\n  - {method: a/b, namespace: a, action: b}\n  - {method: a/b, namespace: a, action: c}\n": "earlier rule",
		"methods:\n  - {method: 'a b', namespace: a, action: b}\n":                                           "segments",
		"methods:\n  - {method: a//b, namespace: a, action: b}\n":                                            "segments",
		"methods:\n  - {method: a.b, namespace: a, action: b}\n":                                             "segments",
		"methods:\n  - {method: a/b, namespace: a, action: b, rate: 1/1m}\n":                                 "rate",
		"methods:\n  - {method: a/b, namespace: a, action: '*'}\n":                                           "only meaningful",
	} {
		if _, err := Parse([]byte(in), "/"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error saying %q", in, err, want)
		}
	}
}
