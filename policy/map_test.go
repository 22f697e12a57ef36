package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

const mapPolicy = `
tools:
  - match: read_file          # 0: exact, before the glob that also matches it
    namespace: docs
    action: read
    resource: { arg: /path }
    cost: 100
  - match: "read_*"           # 1
    namespace: docs
    action: read-other
    resource: { arg: /file }
  - match: "write_*"          # 2
    namespace: docs
    action: write
    resource: { arg: /path, prefix: /srv }
    cost: 0
  - match: get_time           # 3
    namespace: clock
    action: read
    resource: "*"
  - match: fetch              # 4
    namespace: web
    action: get
    resource: { arg: /request/urls/1 }
  - match: odd                # 5
    namespace: odd
    action: read
    resource: { arg: "/a~1b/m~0n/" }
  - match: "tool.{x,y}"       # 6
    namespace: braces
    action: call
    resource: https://example.com/fixed
default_cost: 3
`

func TestMap(t *testing.T) {
	p := mustParse(t, mapPolicy)
	tests := []struct {
		tool, args string
		want       Call
	}{
		{"read_file", `{"path": "/docs/a.md"}`, Call{"docs", "read", "/docs/a.md", 100, 100, 0, Rate{}}},
		{"read_other", `{"file": "/docs/b.md", "path": "ignored"}`, Call{"docs", "read-other", "/docs/b.md", 3, 3, 1, Rate{}}},
		{"write_note", `{"path": "/notes/x"}`, Call{"docs", "write", "/srv/notes/x", 0, 0, 2, Rate{}}},
		{"write_", `{"path": ""}`, Call{"docs", "write", "/srv", 0, 0, 2, Rate{}}},
		{"get_time", ``, Call{"clock", "read", "*", 3, 3, 3, Rate{}}},
		{"get_time", `not even JSON`, Call{"clock", "read", "*", 3, 3, 3, Rate{}}},
		{"fetch", `{"request": {"urls": ["https://a", "https://b"]}}`, Call{"web", "get", "https://b", 3, 3, 4, Rate{}}},
		{"fetch", ` { "request" : { "urls" : [ {"x": [1,2]}, "https://b\u00e9" ] } } `, Call{"web", "get", "https://bé", 3, 3, 4, Rate{}}},
		{"odd", `{"a/b": {"m~n": {"": "/deep"}}}`, Call{"odd", "read", "/deep", 3, 3, 5, Rate{}}},
		{"tool.x", `{}`, Call{"braces", "call", "https://example.com/fixed", 3, 3, 6, Rate{}}},
		// No rule: mcp:<tool>:* at the default cost, arguments unread.
		{"tool.z", `[1]`, Call{"mcp", "tool.z", "*", 3, 3, -1, Rate{}}},
		{"Read_file", `{}`, Call{"mcp", "Read_file", "*", 3, 3, -1, Rate{}}},
		{"weird:name", `{}`, Call{"mcp", "weird:name", "*", 3, 3, -1, Rate{}}},
	}
	for _, tt := range tests {
		got, err := p.Map(tt.tool, json.RawMessage(tt.args))
		if err != nil || got != tt.want {
			t.Errorf("Map(%q, %s) = %+v, %v; want %+v", tt.tool, tt.args, got, err, tt.want)
		}
	}
}

func TestMapFirstRuleWins(t *testing.T) {
	// Overlapping globs: the first that matches decides.
	p := mustParse(t, `
tools:
  - {match: "*_file", namespace: a, action: any-file}
  - {match: "read_*", namespace: a, action: any-read}
`)
	for tool, want := range map[string]string{"read_file": "any-file", "write_file": "any-file", "read_x": "any-read"} {
		c, err := p.Map(tool, nil)
		if err != nil || c.Action != want {
			t.Errorf("Map(%q) = %+v, %v; want action %s", tool, c, err, want)
		}
	}
	// An exact rule after a glob that matches it would never apply, so
	// Parse refuses it rather than let the operator believe it does.
	_, err := Parse([]byte(`
tools:
  - {match: "read_*", namespace: a, action: any-read}
  - {match: read_dir, namespace: a, action: dir}
`), "")
	if err == nil || !strings.Contains(err.Error(), `"read_dir" never applies`) {
		t.Errorf("an exact rule after a glob matching it: %v", err)
	}
}

func TestMapErrors(t *testing.T) {
	p := mustParse(t, mapPolicy)
	tests := []struct {
		tool, args, want string
	}{
		{"read_file", ``, "the call has no arguments"},
		{"read_file", `null`, "the call has no arguments"},
		{"read_file", `{}`, "/path: missing"},
		{"read_file", `{"Path": "/x"}`, "/path: missing"},
		{"read_file", `{"path": 5}`, "/path is a number, not a string"},
		{"read_file", `{"path": null}`, "/path is null, not a string"},
		{"read_file", `{"path": ["/x"]}`, "/path is an array, not a string"},
		{"read_file", `{"path": {"p": "/x"}}`, "/path is an object, not a string"},
		{"read_file", `{"path": true}`, "/path is a boolean, not a string"},
		{"read_file", `["/x"]`, "the arguments are not a JSON object"},
		{"read_file", `"/x"`, "the arguments are not a JSON object"},
		{"read_file", `{"path": "/a", "path": "/b"}`, "/path: given twice"},
		{"read_file", `{"path": "/a", "p\u0061th": "/b"}`, "/path: given twice"},
		{"read_file", `{"path": "\ud800"}`, "unpaired surrogate"},
		{"read_file", "{\"path\": \"\xff\"}", "not valid UTF-8"},
		{"read_file", `{"path": "/a"`, "the arguments are not valid JSON"},
		{"fetch", `{"request": "x"}`, "/request is a string, not an object or array"},
		{"fetch", `{"request": {"urls": ["only one"]}}`, "/request/urls/1: missing"},
		{"fetch", `{"request": {"urls": {"1": "object, not array"}}}`, ""}, // objects take "1" as a name
		{"read_other", `{"file": 1}`, "/file is a number"},
		{"read_other", `{"file": "/a"} {}`, "the arguments are not valid JSON"},
		{"read_other", `{"x": [1, {"file": "/no"}], "file": "/a\"b", "y": "}"}`, ""},
		{"read_other", `{"x": "\"file\": 1", "file": -1.5e3}`, "/file is a number"},
	}
	for _, tt := range tests {
		c, err := p.Map(tt.tool, json.RawMessage(tt.args))
		if tt.want == "" {
			if err != nil {
				t.Errorf("Map(%q, %s) = %v", tt.tool, tt.args, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrUnmappable) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Map(%q, %s) = %+v, %v; want an ErrUnmappable containing %q", tt.tool, tt.args, c, err, tt.want)
			continue
		}
		if c.Namespace == "" || c.Action == "" || c.Resource != "" || c.Rule < 0 {
			t.Errorf("Map(%q, %s) error carried %+v; want the rule, namespace and action and no resource", tt.tool, tt.args, c)
		}
	}
	if _, err := p.Map("", nil); !errors.Is(err, ErrUnmappable) {
		t.Errorf("Map of an empty tool name: %v", err)
	}
	if _, err := p.Map(strings.Repeat("x", MaxToolNameLen+1), nil); !errors.Is(err, ErrUnmappable) {
		t.Errorf("Map of a long tool name: %v", err)
	}
	want := `the call cannot be mapped to a capability: tool "read_file": /path: missing`
	if _, err := p.Map("read_file", json.RawMessage(`{}`)); err == nil || err.Error() != want {
		t.Errorf("error text = %v\nwant %s", err, want)
	}
}

func TestMapArrayIndexes(t *testing.T) {
	p := mustParse(t, "tools:\n  - {match: t, namespace: n, action: a, resource: {arg: /l/IDX}}\n")
	for idx, want := range map[string]string{"0": "zero", "2": "two", "3": "missing", "-": `"-" names no element`,
		"01": "not an array index", "+1": "not an array index", "1e0": "not an array index", "99999999999999999999999": "missing"} {
		tokens, err := parsePointer("/l/" + idx)
		if err != nil {
			t.Fatal(err)
		}
		p.Tools[0].Resource.tokens = tokens
		c, err := p.Map("t", json.RawMessage(`{"l": ["zero", "one", "two"]}`))
		got := c.Resource
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("index %q: got %q, want %q", idx, got, want)
		}
	}
}

func TestMapRuleBuiltInCode(t *testing.T) {
	p := Default()
	p.Tools = []Rule{{Match: "read_*", Namespace: "docs", Action: "read", Resource: Resource{Arg: "/path"}}}
	if c, err := p.Map("read_*", json.RawMessage(`{"path": "/x"}`)); err != nil || c.Resource != "/x" {
		t.Errorf("exact name: %+v, %v", c, err)
	}
	if c, _ := p.Map("read_file", nil); c.Rule != -1 {
		t.Errorf("a rule built in code matched as a glob: %+v", c)
	}
}

func TestVisible(t *testing.T) {
	p := mustParse(t, mapPolicy)
	caps := func(ss ...string) []dct.Capability {
		var out []dct.Capability
		for _, s := range ss {
			c, err := dct.ParseCapability(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		return out
	}
	tests := []struct {
		tool string
		caps []dct.Capability
		want bool
	}{
		// Resource from an argument: namespace and action decide.
		{"read_file", caps("docs:read:/project/**"), true},
		{"read_file", caps("docs:read:/one/file.md"), true},
		{"read_file", caps("docs:*:/x"), true},
		{"read_file", caps("*:*:/x"), true},
		{"read_file", caps("docs:write:/project/**"), false},
		{"read_file", caps("doc:read:*"), false},
		{"read_file", nil, false},
		{"write_x", caps("docs:read:*", "docs:write:/srv/**"), true},
		// Literal resource: the grant must cover it.
		{"get_time", caps("clock:read:*"), true},
		{"get_time", caps("clock:read:**"), true},
		{"get_time", caps("clock:read:/x/**"), false},
		{"tool.y", caps("braces:call:https://example.com/*"), true},
		{"tool.y", caps("braces:call:https://example.org/*"), false},
		// No rule: mcp:<tool>:*.
		{"other", caps("mcp:other:*"), true},
		{"other", caps("mcp:*:*"), true},
		{"other", caps("mcp:other:/x"), false},
		{"other", caps("mcp:another:*"), false},
		{"", caps("*:*:*"), false},
	}
	for _, tt := range tests {
		if got := p.Visible(tt.tool, tt.caps); got != tt.want {
			t.Errorf("Visible(%q, %v) = %v, want %v", tt.tool, tt.caps, got, tt.want)
		}
	}
}

// A tool Visible hides is one whose every call verification would deny,
// for the literal and default mappings where Map needs no arguments.
func TestVisibleAgreesWithMap(t *testing.T) {
	p := mustParse(t, mapPolicy)
	grants := [][]dct.Capability{
		{{Namespace: "clock", Action: "read", Resource: "*"}},
		{{Namespace: "clock", Action: "read", Resource: "/a"}},
		{{Namespace: "mcp", Action: "*", Resource: "**"}},
		{{Namespace: "*", Action: "call", Resource: "https://example.com/**"}},
	}
	for _, tool := range []string{"get_time", "tool.x", "other"} {
		for _, g := range grants {
			c, err := p.Map(tool, nil)
			if err != nil {
				t.Fatal(err)
			}
			covered := false
			for _, cap := range g {
				covered = covered || cap.Covers(c.Namespace, c.Action, c.Resource)
			}
			if p.Visible(tool, g) != covered {
				t.Errorf("%s with %v: Visible %v, covered %v", tool, g, p.Visible(tool, g), covered)
			}
		}
	}
}

func BenchmarkMap(b *testing.B) {
	p := mustParse(b, mapPolicy)
	args := json.RawMessage(`{"content": "` + strings.Repeat("x", 1024) + `", "path": "/docs/a.md", "mode": "w"}`)
	for _, bm := range []struct{ name, tool string }{
		{"literal", "get_time"}, {"exact+arg", "read_file"}, {"glob+arg", "write_x"}, {"default", "unlisted"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Map(bm.tool, args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// MapResource refuses a "." or ".." segment because a server may resolve
// it to another path, also with a query or fragment after it. A ".."
// followed by path parameters (";", RFC 3986 §3.3) is the same segment to
// servers that strip parameters before normalizing (servlet containers,
// Spring, many proxies): "/project/..;/secret" reads "/secret". The grant
// file:///project/** matches it, since "..;" is no dot segment to the
// segment matcher either.
// Found by the second red team (was TestRedteam2DotSegmentWithPathParameters).
func TestMapResourceRefusesDotSegmentWithPathParameters(t *testing.T) {
	p := Default()
	grant := dct.Capability{Namespace: ResourceNamespace, Action: ResourceAction, Resource: "file:///project/**"}
	for _, uri := range []string{
		"file:///project/..;/secret.md",
		"file:///project/..;jsessionid=x/secret.md",
		"file:///project/.;/secret.md",
		"file:///project/sub/..%3B/secret.md",
	} {
		c, err := p.MapResource(uri)
		if err == nil && grant.Covers(c.Namespace, c.Action, c.Resource) {
			t.Errorf("%s is mapped to %s:%s:%s, which %s grants; want ErrUnmappable (a dot segment with parameters)", uri, c.Namespace, c.Action, c.Resource, grant.Resource)
		} else if err != nil && !errors.Is(err, ErrUnmappable) {
			t.Errorf("%s: %v", uri, err)
		}
	}
}
