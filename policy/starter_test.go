package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestWriteStarter(t *testing.T) {
	tools := []StarterTool{
		{Name: "read_file", Description: "Read a file.\n\nLong\tdetails.", ReadOnly: true, InputSchema: json.RawMessage(
			`{"type":"object","properties":{"url":{"type":"string"},"path":{"type":"string"}}}`)},
		{Name: "fetch", InputSchema: json.RawMessage(`{"properties":{"url":{"type":["string","null"]}}}`)},
		{Name: "count", InputSchema: json.RawMessage(`{"properties":{"file":{"type":"integer"},"Path":{"type":"string"}}}`)},
		{Name: "get_time", ReadOnly: true, InputSchema: json.RawMessage(`not JSON`)},
		{Name: "ns:tool*"},
		{Name: "read_file"},
		{Name: "*"},
		{Name: ""},
		{Name: "yes,no"},
	}
	var b strings.Builder
	if err := WriteStarter(&b, Starter{Command: []string{"npx", "-y", "server\nx"}, Namespace: "fs", Tools: tools}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"#   npx -y server x\n",
		"  # read-only tools (readOnlyHint): a token granting fs:read:... calls them all\n  #   read_file: Read a file. Long details.\n  - match: read_file\n    namespace: fs\n    action: read\n",
		`    # the resource is the "path" argument`,
		"    resource: {arg: /path}\n",
		"  #   get_time\n  - match: get_time\n    namespace: fs\n    action: read\n    resource: \"*\"\n",
		"  #   fetch\n  - match: fetch\n    namespace: fs\n    action: write\n    # the resource is the \"url\" argument",
		"    resource: {arg: /url}\n",
		"  # tools that may change things (no readOnlyHint): a token granting fs:write:... calls them all\n  #   count\n  #   ns:tool*\n  #   *\n  #   yes,no\n" +
			"  - match: \"{count,ns:tool\\\\*,\\\\*,yes\\\\,no}\"\n    namespace: fs\n    action: write\n    resource: \"*\"\n",
		"  # tool read_file: no rule, listed twice; the first rule covers it\n",
		"  # tool : no rule, its name is empty",
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
	if len(p.Tools) != 4 {
		t.Errorf("%d rules, want 4", len(p.Tools))
	}
	if p.Tools = nil; !reflect.DeepEqual(p, Default()) {
		t.Errorf("the starter's settings differ from Default(): %+v", p)
	}
	p, _ = Parse([]byte(out), "")
	for _, c := range []struct {
		tool string
		want Call
	}{
		{"read_file", Call{Namespace: "fs", Action: "read", Resource: "/a", Rule: 0}},
		{"get_time", Call{Namespace: "fs", Action: "read", Resource: "*", Rule: 1}},
		{"count", Call{Namespace: "fs", Action: "write", Resource: "*", Rule: 3}},
		{"ns:tool*", Call{Namespace: "fs", Action: "write", Resource: "*", Rule: 3}},
		{"*", Call{Namespace: "fs", Action: "write", Resource: "*", Rule: 3}},
		{"yes,no", Call{Namespace: "fs", Action: "write", Resource: "*", Rule: 3}},
		// The names are literal in the brace glob.
		{"ns:toolX", Call{Namespace: DefaultNamespace, Action: "ns:toolX", Resource: "*", Rule: -1}},
		{"yes", Call{Namespace: DefaultNamespace, Action: "yes", Resource: "*", Rule: -1}},
		{"other", Call{Namespace: DefaultNamespace, Action: "other", Resource: "*", Rule: -1}},
	} {
		got, err := p.Map(c.tool, json.RawMessage(`{"path":"/a"}`))
		got.MaxCost = 0
		if err != nil || got != c.want {
			t.Errorf("Map(%q) = %+v, %v; want %+v", c.tool, got, err, c.want)
		}
	}

	// A group whose match would outgrow MaxMatchLen goes on in another rule.
	var many []StarterTool
	for i := range 40 {
		many = append(many, StarterTool{Name: fmt.Sprintf("tool_%02d_%s", i, strings.Repeat("x", 40))})
	}
	b.Reset()
	if err := WriteStarter(&b, Starter{Tools: many}); err != nil {
		t.Fatal(err)
	}
	if p, err = Parse([]byte(b.String()), ""); err != nil {
		t.Fatalf("the starter of 40 long names does not parse: %v", err)
	}
	if len(p.Tools) != 2 {
		t.Errorf("40 names of 48 bytes: %d rules, want 2", len(p.Tools))
	}
	for _, tool := range many {
		if c, err := p.Map(tool.Name, nil); err != nil || c.Rule < 0 || c.Action != StarterWriteAction {
			t.Errorf("Map(%s) = %+v, %v", tool.Name, c, err)
		}
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
