package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

const resourcePolicy = `
resources:
  - match: "demo://resource/static/document/*"   # 0
    namespace: docs
    action: read
    cost: 10
  - match: "demo://resource/dynamic/**"          # 1
    namespace: demo
    action: generate
    cost: 50
    max_cost: 500
  - match: "demo://resource/session/x"           # 2: exact
    namespace: demo
    action: session
  - match: "file:///srv/{a,b}/*.md"              # 3
    namespace: files
    action: read
  - match: "demo://**"                           # 4: what the others leave
    namespace: mcp-resource
    action: read
    cost: 1
prompts:
  - match: simple-prompt                         # 0
    namespace: demo
    action: prompt
    cost: 5
  - match: "*-prompt"                            # 1
    namespace: demo
    action: prompt
    resource: "*"
    max_cost: 40
  - match: "team/{a,b}"                          # 2
    namespace: teams
    action: get
    resource: shared
default_cost: 3
`

func TestParseResourcesAndPrompts(t *testing.T) {
	p := mustParse(t, resourcePolicy)
	want := []ruleView{
		{"demo://resource/static/document/*", "docs", "read", "", "", "", nil, cost(10), 3},
		{"demo://resource/dynamic/**", "demo", "generate", "", "", "", nil, cost(50), 7},
		{"demo://resource/session/x", "demo", "session", "", "", "", nil, nil, 12},
		{"file:///srv/{a,b}/*.md", "files", "read", "", "", "", nil, nil, 15},
		{"demo://**", "mcp-resource", "read", "", "", "", nil, cost(1), 18},
	}
	if got := view(p.Resources); !reflect.DeepEqual(got, want) {
		t.Errorf("Resources =\n%+v\nwant\n%+v", got, want)
	}
	want = []ruleView{
		{"simple-prompt", "demo", "prompt", "", "", "", nil, cost(5), 23},
		{"*-prompt", "demo", "prompt", "*", "", "", nil, nil, 27},
		{"team/{a,b}", "teams", "get", "shared", "", "", nil, nil, 32},
	}
	if got := view(p.Prompts); !reflect.DeepEqual(got, want) {
		t.Errorf("Prompts =\n%+v\nwant\n%+v", got, want)
	}
	if m := p.Resources[1].MaxCost; m == nil || *m != 500 || p.Resources[0].MaxCost != nil || *p.Prompts[1].MaxCost != 40 {
		t.Errorf("max_cost not read: %v %v", m, p.Resources[0].MaxCost)
	}
	if len(p.Tools) != 0 {
		t.Errorf("Tools = %+v", p.Tools)
	}
	// A max_cost equal to the cost, or to the default cost, is fine.
	mustParse(t, "tools:\n  - {match: t, namespace: n, action: a, cost: 5, max_cost: 5}\n  - {match: u, namespace: n, action: a, max_cost: 3}\ndefault_cost: 3\n")
	// Each kind may use its own default namespace, to give it a cost.
	mustParse(t, "tools: [{match: t, namespace: mcp, action: t}]\nresources: [{match: \"x://**\", namespace: mcp-resource, action: read}]\n"+
		"prompts: [{match: p, namespace: mcp-prompt, action: get}]\n")
}

func TestMapResource(t *testing.T) {
	p := mustParse(t, resourcePolicy)
	for _, c := range []struct {
		uri  string
		want Call
	}{
		{"demo://resource/static/document/architecture.md", Call{"docs", "read", "demo://resource/static/document/architecture.md", 10, 10, 0, Rate{}}},
		{"demo://resource/static/document/a%20b.md", Call{"docs", "read", "demo://resource/static/document/a%20b.md", 10, 10, 0, Rate{}}},
		{"demo://resource/static/document/", Call{"docs", "read", "demo://resource/static/document/", 10, 10, 0, Rate{}}},
		{"demo://resource/dynamic/text/1", Call{"demo", "generate", "demo://resource/dynamic/text/1", 50, 500, 1, Rate{}}},
		{"demo://resource/session/x", Call{"demo", "session", "demo://resource/session/x", 3, 3, 2, Rate{}}},
		{"file:///srv/a/notes.md", Call{"files", "read", "file:///srv/a/notes.md", 3, 3, 3, Rate{}}},
		// * does not cross '/': one level deeper falls to the catch-all.
		{"demo://resource/static/document/sub/x.md", Call{"mcp-resource", "read", "demo://resource/static/document/sub/x.md", 1, 1, 4, Rate{}}},
		{"demo://resource/session/y", Call{"mcp-resource", "read", "demo://resource/session/y", 1, 1, 4, Rate{}}},
		// Query strings and fragments are part of the URI: the rule's *
		// takes them, and the capability names the URI with them.
		{"demo://resource/static/document/a.md?rev=2", Call{"docs", "read", "demo://resource/static/document/a.md?rev=2", 10, 10, 0, Rate{}}},
		{"demo://resource/static/document/a.md#intro", Call{"docs", "read", "demo://resource/static/document/a.md#intro", 10, 10, 0, Rate{}}},
		{"demo://resource/static/document/a.md?next=/etc/passwd", Call{"mcp-resource", "read", "demo://resource/static/document/a.md?next=/etc/passwd", 1, 1, 4, Rate{}}},
		{"file:///srv/a/notes.md?x", Call{"mcp-resource", "read", "file:///srv/a/notes.md?x", 3, 3, -1, Rate{}}},
		// No rule: mcp-resource:read:<URI> at the default cost.
		{"file:///etc/passwd", Call{"mcp-resource", "read", "file:///etc/passwd", 3, 3, -1, Rate{}}},
		{"DEMO://resource/session/x", Call{"mcp-resource", "read", "DEMO://resource/session/x", 3, 3, -1, Rate{}}},
		{"no scheme at all", Call{"mcp-resource", "read", "no scheme at all", 3, 3, -1, Rate{}}},
		{".hidden/..x/x..", Call{"mcp-resource", "read", ".hidden/..x/x..", 3, 3, -1, Rate{}}},
		{"demo://x?..", Call{"mcp-resource", "read", "demo://x?..", 1, 1, 4, Rate{}}},
		{"demo://x/%20%2", Call{"mcp-resource", "read", "demo://x/%20%2", 1, 1, 4, Rate{}}},
		{"demo://x/%3F%23%25%C3%A9%2x%", Call{"mcp-resource", "read", "demo://x/%3F%23%25%C3%A9%2x%", 1, 1, 4, Rate{}}},
	} {
		got, err := p.MapResource(c.uri)
		if err != nil || got != c.want {
			t.Errorf("MapResource(%q) = %+v, %v; want %+v", c.uri, got, err, c.want)
		}
	}
}

// A URI a server could read as another path than the one matched cannot be
// mapped at all, whatever the rules and grants.
func TestMapResourceRefuses(t *testing.T) {
	p := mustParse(t, resourcePolicy)
	for uri, want := range map[string]string{
		"":                                         "is empty",
		"demo://" + strings.Repeat("x", 1018):      "is longer than 1024 bytes",
		"demo://resource/static/document/\xff":     "not valid UTF-8",
		"demo://resource/static/document/a\x00":    "control character",
		"demo://resource/static/document/a\nb":     "control character",
		"demo://resource/static/document/a\tb":     "control character",
		"demo://resource/static/document/a\x7f":    "control character",
		"demo://resource/static/document/..\\x":    "backslash",
		"demo://resource/static/document\\..\\x":   "backslash",
		"demo://resource/static/document/%2e%2e":   "percent-encoded '.', '/' or '\\'",
		"demo://resource/static/document/%2E.":     "percent-encoded",
		"demo://resource/static/document/a%2fb":    "percent-encoded",
		"demo://resource/static/document/a%2Fb":    "percent-encoded",
		"demo://resource/static/document/a%5cb":    "percent-encoded",
		"demo://resource/static/document/%41.md":   "percent-encoded letter, digit, '-', '_' or '~'",
		"demo://resource/static/document/a%7e":     "percent-encoded letter",
		"demo://resource/static/document/a%2D":     "percent-encoded letter",
		"demo://resource/static/document/a%5f":     "percent-encoded letter",
		"demo://resource/static/document/%39":      "percent-encoded letter",
		"file:///srv/%64ocs/secret":                "percent-encoded letter",
		"demo://resource/static/document/..":       "'.' or '..' segment",
		"demo://resource/static/document/../x":     "'.' or '..' segment",
		"demo://resource/dynamic/./x":              "'.' or '..' segment",
		"demo://resource/dynamic/..?x=1":           "'.' or '..' segment",
		"demo://resource/dynamic/..#frag":          "'.' or '..' segment",
		"demo://resource/dynamic/.?":               "'.' or '..' segment",
		"..":                                       "'.' or '..' segment",
		"demo://resource/x?path=/../../etc/passwd": "'.' or '..' segment",
	} {
		c, err := p.MapResource(uri)
		if err == nil || !errors.Is(err, ErrUnmappable) || !strings.Contains(err.Error(), want) {
			t.Errorf("MapResource(%q) = %+v, %v; want an ErrUnmappable containing %q", uri, c, err, want)
		}
		if c != (Call{Rule: -1}) {
			t.Errorf("MapResource(%q) error carried %+v", uri, c)
		}
		if p.ResourceVisible(uri, []dct.Capability{{Namespace: "*", Action: "*", Resource: "*"}}) {
			t.Errorf("%q is visible", uri)
		}
	}
	if _, err := p.MapResource("demo://" + strings.Repeat("x", 1017)); err != nil {
		t.Errorf("a URI of 1024 bytes: %v", err)
	}
	want := `the call cannot be mapped to a capability: the resource URI has a '.' or '..' segment, which a server may resolve to another path`
	if _, err := p.MapResource("file:///a/../b"); err == nil || err.Error() != want {
		t.Errorf("error text = %v\nwant %s", err, want)
	}
}

func TestMapPrompt(t *testing.T) {
	p := mustParse(t, resourcePolicy)
	for _, c := range []struct {
		name string
		want Call
	}{
		{"simple-prompt", Call{"demo", "prompt", "simple-prompt", 5, 5, 0, Rate{}}},
		{"args-prompt", Call{"demo", "prompt", "*", 3, 40, 1, Rate{}}},
		{"-prompt", Call{"demo", "prompt", "*", 3, 40, 1, Rate{}}},
		{"team/a", Call{"teams", "get", "shared", 3, 3, 2, Rate{}}},
		{"team/c", Call{"mcp-prompt", "get", "team/c", 3, 3, -1, Rate{}}},
		{"Simple-Prompt", Call{"mcp-prompt", "get", "Simple-Prompt", 3, 3, -1, Rate{}}},
		{"../x", Call{"mcp-prompt", "get", "../x", 3, 3, -1, Rate{}}},
		{"a:b", Call{"mcp-prompt", "get", "a:b", 3, 3, -1, Rate{}}},
	} {
		got, err := p.MapPrompt(c.name, nil)
		if err != nil || got != c.want {
			t.Errorf("MapPrompt(%q) = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, name := range []string{"", strings.Repeat("p", MaxPromptNameLen+1)} {
		if c, err := p.MapPrompt(name, nil); !errors.Is(err, ErrUnmappable) || c != (Call{Rule: -1}) {
			t.Errorf("MapPrompt of %d bytes = %+v, %v", len(name), c, err)
		}
	}
	if _, err := p.MapPrompt(strings.Repeat("p", MaxPromptNameLen), nil); err != nil {
		t.Errorf("a name of %d bytes: %v", MaxPromptNameLen, err)
	}
}

func TestMapRulesBuiltInCode(t *testing.T) {
	p := Default()
	p.DefaultCost = 7
	p.Resources = []Rule{{Match: "demo://*", Namespace: "d", Action: "r", MaxCost: cost(2)}}
	p.Prompts = []Rule{
		{Match: "p*", Namespace: "d", Action: "p"},
		{Match: "q", Namespace: "d", Action: "p", Resource: Resource{Arg: "/x"}},
	}
	// Rules built in code match exactly, and never reserve below the cost.
	if c, err := p.MapResource("demo://*"); err != nil || c != (Call{"d", "r", "demo://*", 7, 7, 0, Rate{}}) {
		t.Errorf("exact URI: %+v, %v", c, err)
	}
	if c, _ := p.MapResource("demo://x"); c.Rule != -1 {
		t.Errorf("a rule built in code matched as a glob: %+v", c)
	}
	if c, err := p.MapPrompt("p*", nil); err != nil || c != (Call{"d", "p", "p*", 7, 7, 0, Rate{}}) {
		t.Errorf("prompt: %+v, %v", c, err)
	}
	if c, err := p.MapPrompt("q", nil); !errors.Is(err, ErrUnmappable) || c.Rule != 1 || c.Resource != "" {
		t.Errorf("a prompt rule taking an argument: %+v, %v", c, err)
	}
}

func TestMapMaxCost(t *testing.T) {
	p := mustParse(t, `
tools:
  - {match: a, namespace: n, action: a, cost: 10, max_cost: 1000}
  - {match: b, namespace: n, action: b, cost: 10}
  - {match: c, namespace: n, action: c, max_cost: 100}
  - {match: d, namespace: n, action: d, resource: {arg: /p}, max_cost: 100}
default_cost: 4
`)
	for tool, want := range map[string][2]int64{"a": {10, 1000}, "b": {10, 10}, "c": {4, 100}, "d": {4, 100}, "other": {4, 4}} {
		c, err := p.Map(tool, []byte(`{"p": "x"}`))
		if err != nil || c.Cost != want[0] || c.MaxCost != want[1] {
			t.Errorf("Map(%q) = %+v, %v; want cost %d, max %d", tool, c, err, want[0], want[1])
		}
	}
	// A call that cannot be mapped still names its costs.
	if c, err := p.Map("d", []byte(`{}`)); err == nil || c.Cost != 4 || c.MaxCost != 100 {
		t.Errorf("unmappable: %+v, %v", c, err)
	}
}

func caps(t testing.TB, ss ...string) []dct.Capability {
	t.Helper()
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

func TestResourceAndPromptVisible(t *testing.T) {
	p := mustParse(t, resourcePolicy)
	for _, c := range []struct {
		uri  string
		caps []dct.Capability
		want bool
	}{
		{"demo://resource/static/document/a.md", caps(t, "docs:read:demo://resource/static/document/*"), true},
		{"demo://resource/static/document/a.md", caps(t, "docs:read:demo://resource/static/**"), true},
		{"demo://resource/static/document/a.md", caps(t, "docs:read:demo://resource/static/document/b.md"), false},
		{"demo://resource/static/document/a.md", caps(t, "docs:*:*"), true},
		{"demo://resource/static/document/a.md", caps(t, "docs:write:*"), false},
		{"demo://resource/static/document/a.md", caps(t, "mcp-resource:read:*"), false}, // a rule maps it elsewhere
		{"demo://resource/static/document/a.md", nil, false},
		{"file:///etc/passwd", caps(t, "mcp-resource:read:file:///etc/*"), true},
		{"file:///etc/passwd", caps(t, "mcp-resource:read:file:///home/**"), false},
		{"file:///etc/passwd", caps(t, "mcp:read:*"), false}, // the tools' namespace grants no resource
		{"file:///etc/passwd", caps(t, "*:read:*"), true},
	} {
		if got := p.ResourceVisible(c.uri, c.caps); got != c.want {
			t.Errorf("ResourceVisible(%q, %v) = %v, want %v", c.uri, c.caps, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		caps []dct.Capability
		want bool
	}{
		{"simple-prompt", caps(t, "demo:prompt:simple-prompt"), true},
		{"simple-prompt", caps(t, "demo:prompt:*"), true},
		{"simple-prompt", caps(t, "demo:prompt:other"), false},
		{"args-prompt", caps(t, "demo:prompt:args-prompt"), false}, // its rule requests "*"
		{"args-prompt", caps(t, "demo:prompt:*"), true},
		{"team/a", caps(t, "teams:get:shared"), true},
		{"unlisted", caps(t, "mcp-prompt:get:unlisted"), true},
		{"unlisted", caps(t, "mcp-prompt:get:*"), true},
		{"unlisted", caps(t, "mcp:unlisted:*"), false},
		{"", caps(t, "*:*:*"), false},
	} {
		if got := p.PromptVisible(c.name, c.caps); got != c.want {
			t.Errorf("PromptVisible(%q, %v) = %v, want %v", c.name, c.caps, got, c.want)
		}
	}
}

func TestResourceTemplateVisible(t *testing.T) {
	p := mustParse(t, resourcePolicy)
	const text = "demo://resource/dynamic/text/{resourceId}"
	for _, c := range []struct {
		template string
		caps     []dct.Capability
		want     bool
	}{
		{text, caps(t, "demo:generate:demo://resource/dynamic/**"), true},
		{text, caps(t, "demo:generate:demo://resource/dynamic/text/*"), true},
		{text, caps(t, "demo:generate:demo://resource/dynamic/text/7"), true},
		{text, caps(t, "demo:*:demo://resource/**"), true},
		{text, caps(t, "*:*:*"), true},
		{text, caps(t, "demo:generate:demo://resource/dynamic/blob/*"), false},
		{text, caps(t, "demo:generate:demo://resource/dynamic/*"), false}, // text/ is already a segment
		{text, caps(t, "demo:generate:demo://resource/static/**"), false},
		{text, caps(t, "docs:read:demo://resource/dynamic/**"), false}, // no rule maps these URIs to docs:read
		{text, caps(t, "demo:session:*"), false},                       // nor to demo:session: its rule is exact
		{text, caps(t, "files:read:**"), false},                        // nor to files:read: its glob begins file:///srv/
		{"file:///{x}", caps(t, "files:read:**"), true},
		{"file:///srv/a/{x}", caps(t, "files:read:**"), true},
		{"file:///srv/c/{x}", caps(t, "files:read:**"), true}, // {a,b} is not literal: the rule errs towards showing
		{text, caps(t, "mcp-resource:read:demo://resource/dynamic/**"), true},
		{text, nil, false},
		// The literal prefix may end inside a segment.
		{"demo://resource/dyn{x}", caps(t, "demo:generate:demo://resource/dynamic/**"), true},
		{"demo://resource/dyn{x}", caps(t, "demo:generate:demo://resource/static/**"), false},
		{"demo://resource/static/document/{name}", caps(t, "docs:read:demo://resource/static/document/*"), true},
		{"demo://resource/static/document/{name}", caps(t, "docs:read:demo://resource/static/document/guide.md"), true},
		{"demo://resource/static/{+path}", caps(t, "docs:read:demo://resource/static/document/*"), true},
		{"demo://resource/session/{id}", caps(t, "demo:session:demo://resource/session/x"), true},
		{"demo://resource/session/{id}", caps(t, "demo:session:demo://resource/session/y"), false},
		{"file:///srv/{dir}/{name}.md", caps(t, "files:read:file:///srv/a/*"), true},
		{"file:///srv/{dir}/{name}.md", caps(t, "files:read:file:///home/*"), false},
		{"{scheme}://x", caps(t, "files:read:file:///srv/a/*"), true}, // anything may come first
		{"{scheme}://x", nil, false},
		// A prefix every expansion of which is refused.
		{"demo://resource/dynamic/../{x}", caps(t, "*:*:*"), false},
		{"demo://resource/dynamic\\{x}", caps(t, "*:*:*"), false},
		{"demo://resource/%2e%2e/{x}", caps(t, "*:*:*"), false},
		{"demo://resource/dynamic/..{x}", caps(t, "demo:generate:demo://resource/dynamic/*"), true}, // "..1" is a name
		{"demo://resource/dynamic/%2{x}", caps(t, "*:*:*"), true},
		// Literal text RFC 6570 percent-encodes: both spellings are tried.
		{"demo://resource/dynamic/é/{x}", caps(t, "demo:generate:demo://resource/dynamic/%C3%A9/*"), true},
		{"demo://resource/dynamic/é/{x}", caps(t, "demo:generate:demo://resource/dynamic/é/*"), true},
		{"demo://resource/dynamic/a b/{x}", caps(t, "demo:generate:demo://resource/dynamic/a%20b/*"), true},
		{"demo://resource/dynamic/\n/{x}", caps(t, "demo:generate:demo://resource/dynamic/%0A/*"), true},
		{"demo://resource/dynamic/\n/{x}", caps(t, "demo:generate:demo://resource/dynamic/\n/*"), false},
		// No expression: the template is one URI.
		{"demo://resource/dynamic/text/1", caps(t, "demo:generate:demo://resource/dynamic/text/1"), true},
		{"demo://resource/dynamic/text/1", caps(t, "demo:generate:demo://resource/dynamic/text/2"), false},
		{"", caps(t, "*:*:*"), false},
	} {
		if got := p.ResourceTemplateVisible(c.template, c.caps); got != c.want {
			t.Errorf("ResourceTemplateVisible(%q, %v) = %v, want %v", c.template, c.caps, got, c.want)
		}
	}
}

// expand replaces each expression of a URI template by value.
func expand(template, value string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(template, '{')
		if i < 0 {
			return b.String() + template
		}
		b.WriteString(template[:i])
		j := strings.IndexByte(template[i:], '}')
		if j < 0 {
			return b.String() + value
		}
		b.WriteString(value)
		template = template[i+j+1:]
	}
}

// A template that has a visible expansion is visible: the rule hides no
// usable template.
func TestResourceTemplateVisibleShowsUsable(t *testing.T) {
	p := mustParse(t, resourcePolicy)
	templates := []string{
		"demo://resource/dynamic/text/{id}", "demo://resource/{kind}/document/{name}", "demo://resource/static/document/{name}",
		"demo://resource/session/{id}", "file:///srv/{d}/{n}.md", "{x}", "demo://{x}", "file:///{+path}", "demo://resource/dynamic/é/{x}",
	}
	values := []string{"", "1", "x", "a.md", "static", "dynamic", "a/b", "a/b.md", "..", "%2e", "x?y", "session/x", "x/x", "é", "%C3%A9"}
	grants := [][]dct.Capability{
		caps(t, "demo:generate:demo://resource/dynamic/**"), caps(t, "docs:read:demo://resource/static/document/*"),
		caps(t, "demo:session:demo://resource/session/x"), caps(t, "files:read:file:///srv/a/*"), caps(t, "mcp-resource:read:**"),
		caps(t, "mcp-resource:read:demo://*/*/*/*/*"), caps(t, "*:read:file:///**"), caps(t, "demo:*:demo://resource/*/*/*"),
		caps(t, "mcp-resource:read:file:///*/*"),
	}
	shown := 0
	for _, tmpl := range templates {
		for _, g := range grants {
			visible := p.ResourceTemplateVisible(tmpl, g)
			if visible {
				shown++
			}
			for _, v := range values {
				if uri := expand(tmpl, v); p.ResourceVisible(uri, g) && !visible {
					t.Errorf("template %q is hidden from %v, which can read %q", tmpl, g, uri)
				}
			}
		}
	}
	if shown == 0 || shown == len(templates)*len(grants) {
		t.Errorf("%d of %d shown: the test exercises too little", shown, len(templates)*len(grants))
	}
}

func FuzzMapResource(f *testing.F) {
	f.Add("demo://resource/static/document/a.md", "demo://resource/**")
	f.Add("demo://resource/dynamic/text/1?x#y", "demo://resource/dynamic/text/*")
	f.Add("file:///srv/a/../b.md", "file:///srv/**")
	f.Add("demo://x/%2E%2e/y", "*")
	f.Add("demo:\\\\x", "**")
	p := mustParse(f, resourcePolicy)
	f.Fuzz(func(t *testing.T, uri, pattern string) {
		c, err := p.MapResource(uri)
		g := []dct.Capability{{Namespace: "*", Action: "*", Resource: pattern}}
		if err != nil {
			if !errors.Is(err, ErrUnmappable) || c != (Call{Rule: -1}) || uriProblem(uri) == "" {
				t.Fatalf("MapResource(%q) = %+v, %v", uri, c, err)
			}
			// As a template, uri expands to itself with what a URI cannot
			// hold percent-encoded (RFC 6570), which may be another URI.
			if p.ResourceVisible(uri, g) || p.ResourceTemplateVisible(uri, g) && !strings.Contains(uri, "{") && !p.ResourceVisible(encodeTemplateLiteral(uri), g) {
				t.Fatalf("%q cannot be mapped but is visible", uri)
			}
			return
		}
		if c.Resource != uri || c.MaxCost < c.Cost || c.Namespace == "" || c.Action == "" {
			t.Fatalf("MapResource(%q) = %+v", uri, c)
		}
		if c.Rule >= 0 && !p.Resources[c.Rule].matches(uri) {
			t.Fatalf("rule %d does not match %q", c.Rule, uri)
		}
		for i := 0; i < c.Rule; i++ {
			if p.Resources[i].matches(uri) {
				t.Fatalf("rule %d decided %q, but rule %d matches it first", c.Rule, uri, i)
			}
		}
		if c.Rule == -1 && (c.Namespace != ResourceNamespace || c.Action != ResourceAction) {
			t.Fatalf("the default mapping of %q is %+v", uri, c)
		}
		visible := p.ResourceVisible(uri, g)
		if visible != dct.MatchResource(pattern, uri) {
			t.Fatalf("ResourceVisible(%q, %q) = %v", uri, pattern, visible)
		}
		// Every template whose expansion this URI is must be visible too;
		// here, the URI cut anywhere and continued with an expression.
		if visible {
			for i := 0; i <= len(uri); i++ {
				if tmpl := uri[:i] + "{x}"; !p.ResourceTemplateVisible(tmpl, g) {
					t.Fatalf("%q is visible to %q, but the template %q is not", uri, pattern, tmpl)
				}
			}
		}
	})
}

func FuzzResourceTemplateVisible(f *testing.F) {
	f.Add("demo://resource/dynamic/text/{id}", "7", "demo:generate:demo://resource/dynamic/**")
	f.Add("demo://resource/{a}/document/{b}", "static", "docs:read:demo://resource/static/document/*")
	f.Add("file:///srv/{d}/{n}.md", "a", "files:read:file:///srv/a/*")
	f.Add("{x}", "demo://resource/session/x", "demo:session:demo://resource/session/x")
	f.Add("demo://é/{x}", "1", "mcp-resource:read:demo://%C3%A9/*")
	f.Add("demo://é/0", "", "mcp-resource:read:demo://%C3%A9/0")
	p := mustParse(f, resourcePolicy)
	f.Fuzz(func(t *testing.T, template, value, grant string) {
		g, err := dct.ParseCapability(grant)
		if err != nil {
			return
		}
		caps := []dct.Capability{g}
		visible := p.ResourceTemplateVisible(template, caps)
		for _, uri := range []string{expand(template, value), expand(encodeTemplateLiteral(template), value)} {
			if p.ResourceVisible(uri, caps) && !visible {
				t.Fatalf("template %q is hidden from %v, which can read %q", template, g, uri)
			}
		}
	})
}

func BenchmarkMapResource(b *testing.B) {
	p := mustParse(b, resourcePolicy)
	for _, bm := range []struct{ name, uri string }{
		{"glob", "demo://resource/dynamic/text/12345"}, {"default", "file:///home/me/notes/today.md"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.MapResource(bm.uri); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkResourceTemplateVisible(b *testing.B) {
	p := mustParse(b, resourcePolicy)
	g := caps(b, "docs:read:demo://resource/static/**", "demo:generate:demo://resource/dynamic/text/*")
	b.ReportAllocs()
	for b.Loop() {
		if !p.ResourceTemplateVisible("demo://resource/dynamic/text/{resourceId}", g) {
			b.Fatal("hidden")
		}
	}
}

func TestDotSegment(t *testing.T) {
	for _, c := range []struct {
		uri             string
		withLast, whole bool // with the last segment; whole segments only
	}{
		{"..", true, false},
		{".", true, false},
		{"a/..", true, false},
		{"a/../b", true, true},
		{"./b", true, true},
		{"a/..?x/b", true, true},
		{"a/.#x", true, false},
		{"a/..x/b", false, false},
		{"a/x../b", false, false},
		{"a?../b", false, false},
		{"a/b?x=/../c", true, true},
		{"", false, false},
		{"a//b/", false, false},
	} {
		if got := dotSegment(c.uri, true); got != c.withLast {
			t.Errorf("dotSegment(%q, true) = %v", c.uri, got)
		}
		if got := dotSegment(c.uri, false); got != c.whole {
			t.Errorf("dotSegment(%q, false) = %v", c.uri, got)
		}
	}
}
