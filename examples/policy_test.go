package examples

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/policy"
)

// registeredTools reads the names of the tools a pinned package registers from
// its JavaScript: every tool, including those the server offers only to
// clients with some capability, which tools/list in these tests never
// shows all of.
func registeredTools(t *testing.T, pkg string, files string, pattern *regexp.Regexp) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(npmDir, "node_modules", pkg, files))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no %s in %s: %v", files, pkg, err)
	}
	var names []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pattern.FindAllSubmatch(b, -1) {
			for _, name := range m[1:] {
				if len(name) > 0 {
					names = append(names, string(name))
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// checkPolicyMapsTools checks that an example policy maps every tool the
// pinned server has to the capability and cost the example's README lists.
func checkPolicyMapsTools(t *testing.T, example string, tools []string, want map[string]policy.Call, args map[string]string) {
	t.Helper()
	p, err := policy.Load(filepath.Join(example, "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(tools, names) {
		t.Errorf("the pinned server has the tools\n%v\nthe test expects\n%v", tools, names)
	}
	for _, tool := range tools {
		a := args[tool]
		if a == "" {
			a = "{}"
		}
		got, err := p.Map(tool, json.RawMessage(a))
		if err != nil {
			t.Errorf("%s %s: %v", tool, a, err)
			continue
		}
		if got.Rule < 0 {
			t.Errorf("%s: no rule of the policy matches it", tool)
		}
		got.Rule = 0
		if got != want[tool] {
			t.Errorf("%s %s maps to %+v, want %+v", tool, a, got, want[tool])
		}
	}
}

func TestFilesystemPolicyMapsEveryTool(t *testing.T) {
	t.Parallel()
	tools := registeredTools(t, filesystemPkg, "dist/index.js", regexp.MustCompile(`registerTool\("([^"]+)"`))
	read := policy.Call{Namespace: "fs", Action: "read", Resource: "/p/x"}
	write := policy.Call{Namespace: "fs", Action: "write", Resource: "/p/x"}
	want := map[string]policy.Call{
		"list_allowed_directories": {Namespace: "fs", Action: "roots", Resource: "*"},
		"move_file":                {Namespace: "fs", Action: "write", Resource: "*"},
		"read_multiple_files":      {Namespace: "fs", Action: "read", Resource: "*"},
	}
	args := map[string]string{}
	for _, tool := range fsReadTools {
		want[tool], args[tool] = read, `{"path": "/p/x"}`
	}
	for _, tool := range fsWriteTools {
		want[tool], args[tool] = write, `{"path": "/p/x", "content": ""}`
	}
	checkPolicyMapsTools(t, "filesystem", tools, want, args)
}

func TestEverythingPolicyMapsEveryTool(t *testing.T) {
	t.Parallel()
	tools := registeredTools(t, everythingPkg, "dist/tools/*.js", regexp.MustCompile(`(?m)^const name = "([^"]+)";|registerToolTask\("([^"]+)"`))
	c := func(ns, action string, cost int64) policy.Call {
		return policy.Call{Namespace: ns, Action: action, Resource: "*", Cost: cost, MaxCost: cost}
	}
	want := map[string]policy.Call{
		"echo":                              c("demo", "echo", 100),
		"get-sum":                           c("demo", "compute", 250),
		"get-annotated-message":             c("demo", "read", 0),
		"get-resource-links":                c("demo", "read", 0),
		"get-resource-reference":            c("demo", "read", 0),
		"get-structured-content":            c("demo", "read", 0),
		"get-tiny-image":                    c("demo", "read", 0),
		"trigger-long-running-operation":    c("demo", "long_running", 1000),
		"toggle-simulated-logging":          c("demo", "toggle", 0),
		"toggle-subscriber-updates":         c("demo", "toggle", 0),
		"simulate-research-query":           c("demo", "research", 5000),
		"trigger-sampling-request":          c("client", "sample", 20000),
		"trigger-sampling-request-async":    c("client", "sample", 20000),
		"trigger-elicitation-request":       c("client", "elicit", 0),
		"trigger-elicitation-request-async": c("client", "elicit", 0),
		"trigger-url-elicitation":           c("client", "elicit", 0),
		"get-roots-list":                    c("client", "roots", 0),
		"gzip-file-as-resource":             {Namespace: "net", Action: "fetch", Resource: "https://example.com/a.txt", Cost: 5000, MaxCost: 5000},
		"get-env":                           c("admin", "env", 0),
	}
	args := map[string]string{"gzip-file-as-resource": `{"data": "https://example.com/a.txt"}`}
	checkPolicyMapsTools(t, "everything", tools, want, args)
}

// The everything policy maps every prompt the pinned server registers, its
// static documents, its resource templates and the resources its gzip tool
// makes to the capabilities its header lists.
func TestEverythingPolicyMapsResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	p, err := policy.Load(filepath.Join("everything", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	prompts := registeredTools(t, everythingPkg, "dist/prompts/*.js", regexp.MustCompile(`registerPrompt\("([^"]+)"`))
	want := map[string]policy.Call{
		"simple-prompt":      {Namespace: "demo", Action: "prompt", Resource: "simple-prompt"},
		"args-prompt":        {Namespace: "demo", Action: "prompt", Resource: "args-prompt"},
		"completable-prompt": {Namespace: "demo", Action: "prompt", Resource: "completable-prompt"},
		"resource-prompt":    {Namespace: "demo", Action: "generate", Resource: "demo://resource/dynamic/**", Cost: 10, MaxCost: 10},
	}
	if len(prompts) != len(want) {
		t.Errorf("the pinned server has the prompts %v; the test expects %d", prompts, len(want))
	}
	for _, name := range prompts {
		c, err := p.MapPrompt(name, nil)
		if err != nil || c.Rule < 0 {
			t.Errorf("prompt %s: %+v, %v: no rule maps it", name, c, err)
			continue
		}
		if c.Rule = 0; c != want[name] {
			t.Errorf("prompt %s maps to %+v, want %+v", name, c, want[name])
		}
	}

	// The static documents are the files of dist/docs, each at
	// demo://resource/static/document/<encodeURIComponent(name)>.
	docs, err := filepath.Glob(filepath.Join(npmDir, "node_modules", everythingPkg, "dist", "docs", "*"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no documents: %v", err)
	}
	uris := map[string]policy.Call{}
	for _, d := range docs {
		uri := "demo://resource/static/document/" + url.PathEscape(filepath.Base(d))
		uris[uri] = policy.Call{Namespace: "demo", Action: "document", Resource: uri}
	}
	for _, uri := range []string{"demo://resource/dynamic/text/1", "demo://resource/dynamic/blob/42"} {
		uris[uri] = policy.Call{Namespace: "demo", Action: "generate", Resource: uri, Cost: 10, MaxCost: 10}
	}
	uris["demo://resource/session/README.md.gz"] = policy.Call{Namespace: "demo", Action: "session", Resource: "demo://resource/session/README.md.gz"}
	for uri, w := range uris {
		c, err := p.MapResource(uri)
		if err != nil || c.Rule < 0 {
			t.Errorf("%s: %+v, %v: no rule maps it", uri, c, err)
			continue
		}
		if c.Rule = 0; c != w {
			t.Errorf("%s maps to %+v, want %+v", uri, c, w)
		}
	}
	// The templates in the source are the ones the test expects, and a
	// token for one kind of generated resource sees only its template.
	src, err := os.ReadFile(filepath.Join(npmDir, "node_modules", everythingPkg, "dist", "resources", "templates.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`const uriBase = "demo://resource/dynamic";`, "const textUriTemplate = `${textUriBase}/{resourceId}`;",
		"const textUriBase = `${uriBase}/text`;", "const blobUriBase = `${uriBase}/blob`;"} {
		if !strings.Contains(string(src), s) {
			t.Errorf("templates.js no longer holds %s", s)
		}
	}
	text := []dct.Capability{{Namespace: "demo", Action: "generate", Resource: "demo://resource/dynamic/text/*"}}
	if !p.ResourceTemplateVisible("demo://resource/dynamic/text/{resourceId}", text) ||
		p.ResourceTemplateVisible("demo://resource/dynamic/blob/{resourceId}", text) {
		t.Error("a grant on generated text resources should show the text template and not the blob one")
	}
	// The README's agent token, demo:*:* and client:*:*, reads them all.
	agent := []dct.Capability{{Namespace: "demo", Action: "*", Resource: "*"}, {Namespace: "client", Action: "*", Resource: "*"}}
	for uri := range uris {
		if !p.ResourceVisible(uri, agent) {
			t.Errorf("the agent token cannot read %s", uri)
		}
	}
	for _, name := range prompts {
		if !p.PromptVisible(name, agent) {
			t.Errorf("the agent token cannot get the prompt %s", name)
		}
	}
}
