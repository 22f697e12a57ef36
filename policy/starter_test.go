package policy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestWriteStarter(t *testing.T) {
	tools := []StarterTool{
		{Name: "read_file", Description: "Read a file.\n\nLong\tdetails.", InputSchema: json.RawMessage(
			`{"type":"object","properties":{"url":{"type":"string"},"path":{"type":"string"}}}`)},
		{Name: "fetch", InputSchema: json.RawMessage(`{"properties":{"url":{"type":["string","null"]}}}`)},
		{Name: "count", InputSchema: json.RawMessage(`{"properties":{"file":{"type":"integer"},"Path":{"type":"string"}}}`)},
		{Name: "get_time", InputSchema: json.RawMessage(`not JSON`)},
		{Name: "ns:tool*"},
		{Name: "read_file"},
		{Name: "*"},
		{Name: ""},
		{Name: "yes"},
	}
	var b strings.Builder
	if err := WriteStarter(&b, Starter{Command: []string{"npx", "-y", "server\nx"}, Namespace: "fs", Tools: tools}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"#   npx -y server x\n",
		"  # read_file: Read a file. Long details.\n  - match: read_file\n    namespace: fs\n    action: read_file\n",
		`    # the resource is the "path" argument`,
		"    resource: {arg: /path}\n",
		"  - match: fetch\n    namespace: fs\n    action: fetch\n    # the resource is the \"url\" argument",
		"    resource: {arg: /url}\n",
		"  - match: count\n    namespace: fs\n    action: count\n    resource: \"*\"\n",
		"  - match: get_time\n    namespace: fs\n    action: get_time\n    resource: \"*\"\n",
		"  - match: \"ns:tool\\\\*\"\n    namespace: fs\n    action: \"ns_tool*\"\n",
		"  # tool read_file: no rule, listed twice; the first rule covers it\n",
		"  # tool *: no rule, its name cannot be an action",
		"  # tool : no rule, its name is empty",
		"  - match: \"yes\"\n    namespace: fs\n    action: \"yes\"\n",
		"\nroots: []\n", "\ndefault_cost: 0\n", "\nallow_unauthenticated: false\n", "\nhonour_upstream_cost: false\n",
		"\nresources: []\n", "\nprompts: []\n", "\nrevocation_list: \"\"\n", "\nspend_store: \"\"\n", "\nmax_frame_bytes: 16777216\n", "\nlog:\n  # ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("starter lacks %q:\n%s", want, out)
		}
	}
	p, err := Parse([]byte(out), "")
	if err != nil {
		t.Fatalf("the starter does not parse: %v\n%s", err, out)
	}
	if len(p.Tools) != 6 {
		t.Errorf("%d rules, want 6", len(p.Tools))
	}
	if p.Tools = nil; !reflect.DeepEqual(p, Default()) {
		t.Errorf("the starter's settings differ from Default(): %+v", p)
	}
	p, _ = Parse([]byte(out), "")
	c, err := p.Map("ns:tool*", nil)
	if err != nil || c != (Call{Namespace: "fs", Action: "ns_tool*", Resource: "*", Rule: 4}) {
		t.Errorf("Map(ns:tool*) = %+v, %v", c, err)
	}
	if c, _ := p.Map("ns:toolX", nil); c.Rule != -1 {
		t.Errorf("the escaped name matched as a glob: %+v", c)
	}

	b.Reset()
	if err := WriteStarter(&b, Starter{}); err != nil || !strings.Contains(b.String(), "tools: []") {
		t.Errorf("no tools: %v\n%s", err, b.String())
	}
	if _, err := Parse([]byte(b.String()), ""); err != nil {
		t.Errorf("the empty starter does not parse: %v", err)
	}
	if err := WriteStarter(&b, Starter{Namespace: "a:b"}); err == nil {
		t.Error("WriteStarter accepted the namespace a:b")
	}
	for _, ns := range []string{ResourceNamespace, PromptNamespace} {
		if err := WriteStarter(&b, Starter{Namespace: ns}); err == nil || !strings.Contains(err.Error(), "not of tools") {
			t.Errorf("WriteStarter with namespace %s: %v", ns, err)
		}
	}
}

func TestResourceString(t *testing.T) {
	for _, tt := range []struct {
		r    Resource
		want string
	}{
		{Resource{Value: "*"}, "*"},
		{Resource{Arg: "/path"}, "${/path}"},
		{Resource{Arg: "/path", Prefix: "/srv"}, "/srv${/path}"},
		{Resource{Value: "https://example.com/"}, "https://example.com/"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}
