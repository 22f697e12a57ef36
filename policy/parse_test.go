package policy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
)

const rootID = "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w"

func rootDID(t testing.TB) string {
	t.Helper()
	did, err := identity.DIDFromPrincipalID(rootID)
	if err != nil {
		t.Fatal(err)
	}
	return did
}

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse([]byte(src), "/etc/dos")
	if err != nil {
		t.Fatalf("Parse:\n%s\nerror: %v", src, err)
	}
	return p
}

func cost(n int64) *int64 { return &n }

// rulesView drops compiled state so rules compare with reflect.DeepEqual.
type ruleView struct {
	Match, Namespace, Action string
	Value, Arg, Prefix       string
	Tokens                   []string
	Cost                     *int64
	Line                     int
}

func view(rules []Rule) []ruleView {
	var out []ruleView
	for _, r := range rules {
		out = append(out, ruleView{r.Match, r.Namespace, r.Action, r.Resource.Value, r.Resource.Arg, r.Resource.Prefix, r.Resource.tokens, r.Cost, r.Line})
	}
	return out
}

func TestParseValid(t *testing.T) {
	full := `# every key
roots:
  - ` + rootDID(t) + `
tools:
  - match: read_file
    namespace: docs
    action: read
    resource: { arg: /path }
    cost: 100
  - match: "write_*"
    namespace: docs
    action: write
    resource: { arg: /path, prefix: "/srv" }
  - match: get_time
    namespace: clock
    action: read
    resource: "*"
  - match: "{a,b}?"
    namespace: x
    action: "y"
default_cost: 7
allow_unauthenticated: true
honour_upstream_cost: true
revocation_list: revocations.json
spend_store: /var/lib/dos/spend.log
max_frame_bytes: 1024
log:
  file: logs/proxy.log
  level: debug
`
	p := mustParse(t, full)
	if !reflect.DeepEqual(p.Roots, []string{rootID}) {
		t.Errorf("Roots = %v, want the did:key normalized to %s", p.Roots, rootID)
	}
	want := []ruleView{
		{"read_file", "docs", "read", "", "/path", "", []string{"path"}, cost(100), 5},
		{"write_*", "docs", "write", "", "/path", "/srv", []string{"path"}, nil, 10},
		{"get_time", "clock", "read", "*", "", "", nil, nil, 14},
		{"{a,b}?", "x", "y", "*", "", "", nil, nil, 18},
	}
	if got := view(p.Tools); !reflect.DeepEqual(got, want) {
		t.Errorf("Tools =\n%+v\nwant\n%+v", got, want)
	}
	if p.DefaultCost != 7 || !p.AllowUnauthenticated || !p.HonourUpstreamCost || p.MaxFrameBytes != 1024 {
		t.Errorf("scalars = %d %v %v %d", p.DefaultCost, p.AllowUnauthenticated, p.HonourUpstreamCost, p.MaxFrameBytes)
	}
	if p.RevocationList != "/etc/dos/revocations.json" || p.SpendStore != "/var/lib/dos/spend.log" {
		t.Errorf("paths = %q %q", p.RevocationList, p.SpendStore)
	}
	if p.Log != (LogConfig{File: "/etc/dos/logs/proxy.log", Level: "debug"}) {
		t.Errorf("Log = %+v", p.Log)
	}
	for src, want := range map[string]string{"upstream_user: nobody\n": "nobody", "upstream_user: \"65534:65534\"\n": "65534:65534", "upstream_user: mcp:mcp\n": "mcp:mcp"} {
		if got := mustParse(t, src).UpstreamUser; got != want {
			t.Errorf("%q: UpstreamUser = %q, want %q", src, got, want)
		}
	}

	for name, src := range map[string]string{
		"empty":         "",
		"comment only":  "# nothing yet\n",
		"null document": "~\n",
		"null values":   "roots:\ntools:\nlog:\nrevocation_list:\ndefault_cost: ~\n",
		"empty lists":   "roots: []\ntools: []\n",
		"empty paths":   "revocation_list: \"\"\nspend_store: ''\nlog: {file: \"\"}\n",
		"explicit tags": "default_cost: !!int 0\nallow_unauthenticated: !!bool false\n",
		"document mark": "---\nroots: []\n...\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := mustParse(t, src)
			if !reflect.DeepEqual(p, Default()) {
				t.Errorf("got %+v, want Default() %+v", p, Default())
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	p := Default()
	if p.MaxFrameBytes != 16<<20 || p.Log.Level != "info" || p.AllowUnauthenticated || p.DefaultCost != 0 || len(p.Roots) != 0 || len(p.Tools) != 0 {
		t.Errorf("Default() = %+v", p)
	}
	// A rule without resource requests "*"; without cost it costs the default.
	p = mustParse(t, "tools:\n  - {match: t, namespace: n, action: a}\ndefault_cost: 5\n")
	c, err := p.Map("t", nil)
	if err != nil || c != (Call{Namespace: "n", Action: "a", Resource: "*", Cost: 5, MaxCost: 5, Rule: 0}) {
		t.Errorf("Map = %+v, %v", c, err)
	}
}

func TestParseErrors(t *testing.T) {
	rule := func(extra string) string {
		return "tools:\n  - match: t\n    namespace: n\n    action: a\n" + extra
	}
	tests := []struct {
		name, src string
		want      []string // each problem, in order: "line N: key: message fragment"
	}{
		{"unknown top key", "roots: []\ntool: []\n", []string{`line 2: tool: unknown key; did you mean tools? (known keys here: roots, tools,`}},
		{"unknown rule key", rule("    costs: 5\n"), []string{`line 5: tools[0].costs: unknown key; did you mean cost? (known keys here: match, namespace, action, resource, cost, max_cost, rate, approval)`}},
		{"unknown log key", "log:\n  lvl: info\n", []string{`line 2: log.lvl: unknown key`}},
		{"unknown resource key", rule("    resource: {arg: /p, pre: x}\n"), []string{`line 5: tools[0].resource.pre: unknown key`}},
		{"duplicate top key", "default_cost: 1\nroots: []\ndefault_cost: 2\n", []string{`line 3: default_cost: given twice (first on line 1)`}},
		{"duplicate rule key", rule("    action: b\n"), []string{`line 5: tools[0].action: given twice (first on line 4)`}},
		{"negative cost", rule("    cost: -1\n"), []string{`line 5: tools[0].cost: must be a non-negative integer (microcents) of at most 9007199254740991`}},
		{"cost too large", rule("    cost: 9007199254740992\n"), []string{`line 5: tools[0].cost: must be a non-negative`}},
		{"cost overflows int64", "default_cost: 99999999999999999999999\n", []string{`line 1: default_cost: must be a non-negative`}},
		{"fractional cost", "default_cost: 1.5\n", []string{`line 1: default_cost: must be a non-negative`}},
		{"string cost", "default_cost: \"5\"\n", []string{`line 1: default_cost: must be a non-negative`}},
		{"frame too small", "max_frame_bytes: 1023\n", []string{`line 1: max_frame_bytes: must be an integer from 1024 (1 KiB) to 1073741824 (1 GiB)`}},
		{"frame too large", "max_frame_bytes: 1073741825\n", []string{`line 1: max_frame_bytes: must be an integer from 1024`}},
		{"yes is not a bool", "allow_unauthenticated: yes\n", []string{`line 1: allow_unauthenticated: must be true or false`}},
		{"bool as string", "honour_upstream_cost: \"true\"\n", []string{`line 1: honour_upstream_cost: must be true or false`}},
		{"bad level", "log:\n  level: verbose\n", []string{`line 2: log.level: must be one of debug, info, warn, error`}},
		{"log not a mapping", "log: stderr\n", []string{`line 1: log: must be a mapping with file and level`}},
		{"path not a string", "spend_store: [a]\n", []string{`line 1: spend_store: must be a string`}},
		{"bad root", "roots:\n  - alice\n", []string{`line 2: roots[0]: not a principal ID or did:key`}},
		{"bad did", "roots:\n  - did:key:z6MkNOPE\n", []string{`line 2: roots[0]: not a principal ID or did:key`}},
		{"root twice", "roots:\n  - " + rootID + "\n  - " + rootDID(t) + "\n", []string{`line 3: roots[1]: the same principal as roots[0]`}},
		{"roots not a list", "roots: " + rootID + "\n", []string{`line 1: roots: must be a list of principal IDs or did:key`}},
		{"root not a string", "roots:\n  - 42\n", []string{`line 2: roots[0]: must be a string (YAML reads 42 as int; quote it to make it a string)`}},
		{"tools not a list", "tools:\n  read_file: docs\n", []string{`line 2: tools: must be a list of rules`}},
		{"rule not a mapping", "tools:\n  - read_file\n", []string{`line 2: tools[0]: a rule must be a mapping`}},
		{"missing keys", "tools:\n  - cost: 1\n", []string{
			`line 2: tools[0]: match is required`, `line 2: tools[0]: namespace is required`, `line 2: tools[0]: action is required`}},
		{"null match", "tools:\n  - match:\n    namespace: n\n    action: a\n", []string{`line 2: tools[0]: match is required`}},
		{"empty match", "tools:\n  - match: \"\"\n    namespace: n\n    action: a\n", []string{`line 2: tools[0].match: must not be empty`}},
		{"bad glob", "tools:\n  - match: \"read_[\"\n    namespace: n\n    action: a\n", []string{`line 2: tools[0].match: not a valid glob`}},
		{"empty namespace", "tools:\n  - match: t\n    namespace: \"\"\n    action: a\n", []string{`line 3: tools[0].namespace: must not be empty`}},
		{"colon in action", "tools:\n  - match: t\n    namespace: n\n    action: \"a:b\"\n", []string{`line 4: tools[0].action: must not contain ':'`}},
		{"star namespace", "tools:\n  - match: t\n    namespace: \"*\"\n    action: a\n", []string{`line 3: tools[0].namespace: must name what a call requests`}},
		{"long action", "tools:\n  - match: t\n    namespace: n\n    action: " + strings.Repeat("a", 257) + "\n", []string{`line 4: tools[0].action: longer than 256 bytes`}},
		{"action not a string", "tools:\n  - match: t\n    namespace: n\n    action: true\n", []string{`line 4: tools[0].action: must be a string (YAML reads true as bool`}},
		{"empty resource", rule("    resource: \"\"\n"), []string{`line 5: tools[0].resource: must not be empty`}},
		{"resource list", rule("    resource: [a]\n"), []string{`line 5: tools[0].resource: must be a string or a mapping {arg: JSON pointer, prefix: string}`}},
		{"resource without arg", rule("    resource: {prefix: /x}\n"), []string{`line 5: tools[0].resource: arg is required`}},
		{"pointer without slash", rule("    resource: {arg: path}\n"), []string{`line 5: tools[0].resource.arg: JSON pointer "path" must start with '/', e.g. /path`}},
		{"empty pointer", rule("    resource: {arg: \"\"}\n"), []string{`line 5: tools[0].resource.arg: the empty JSON pointer names all the arguments`}},
		{"bad escape", rule("    resource: {arg: /a~2b}\n"), []string{`line 5: tools[0].resource.arg: JSON pointer "/a~2b": '~' must be followed by 0`}},
		{"pointer too deep", rule("    resource: {arg: " + strings.Repeat("/a", 33) + "}\n"), []string{`has more than 32 parts`}},
		{"prefix not a string", rule("    resource: {arg: /p, prefix: 5}\n"), []string{`line 5: tools[0].resource.prefix: must be a string`}},
		{"exact rule shadowed by glob", "tools:\n  - {match: \"read_*\", namespace: n, action: a}\n  - {match: read_file, namespace: n, action: b}\n",
			[]string{`line 3: tools[1].match: "read_file" never applies: tools[0] (match "read_*", line 2) comes first and matches it`}},
		{"pattern twice", "tools:\n  - {match: \"w*\", namespace: n, action: a}\n  - {match: x, namespace: n, action: a}\n  - {match: \"w*\", namespace: n, action: b}\n",
			[]string{`line 4: tools[2].match: "w*" never applies: tools[0]`}},
		{"tool glob unclosed brace", "tools:\n  - {match: \"0{\", namespace: n, action: a}\n", []string{`line 2: tools[0].match: not a valid glob: the '{' at byte 1 is not closed`}},
		{"tool glob stray brace", "tools:\n  - {match: \"a}\", namespace: n, action: a}\n", []string{`line 2: tools[0].match: not a valid glob: '}' at byte 1 closes no '{'`}},

		// max_cost, on every kind of rule.
		{"max_cost below cost", rule("    cost: 100\n    max_cost: 50\n"),
			[]string{`line 6: tools[0].max_cost: 50 is less than the rule's cost 100; a reported cost is capped at max_cost, so it must be at least the cost: raise it to 100 or more, or remove it`}},
		{"max_cost below default_cost", "tools:\n  - {match: t, namespace: n, action: a, max_cost: 5}\ndefault_cost: 6\n",
			[]string{`line 2: tools[0].max_cost: 5 is less than default_cost 6, which the rule costs;`}},
		{"max_cost negative", "resources:\n  - {match: \"a://*\", namespace: n, action: a, max_cost: -1}\n", []string{`line 2: resources[0].max_cost: must be a non-negative integer`}},
		{"max_cost not a number", "prompts:\n  - {match: p, namespace: n, action: a, max_cost: lots}\n", []string{`line 2: prompts[0].max_cost: must be a non-negative integer`}},
		{"max_cost below cost in prompts", "prompts:\n  - {match: p, namespace: n, action: a, cost: 2, max_cost: 1}\n", []string{`line 2: prompts[0].max_cost: 1 is less than the rule's cost 2`}},

		// The resource and prompt maps.
		{"resources not a list", "resources: {match: x}\n", []string{`line 1: resources: must be a list of rules`}},
		{"resource rule not a mapping", "resources:\n  - demo://x\n", []string{`line 2: resources[0]: a rule must be a mapping with match, namespace, action, cost, max_cost`}},
		{"resource rule typo", "resources:\n  - {match: \"a://*\", namespace: n, action: a, cots: 1}\n",
			[]string{`line 2: resources[0].cots: unknown key; did you mean cost? (known keys here: match, namespace, action, cost, max_cost, rate, approval)`}},
		{"resource rule with resource", "resources:\n  - {match: \"a://*\", namespace: n, action: a, resource: \"*\"}\n",
			[]string{`line 2: resources[0].resource: a resources rule takes no resource: the capability's resource is always the URI`}},
		{"resource rule missing keys", "resources:\n  - {cost: 1}\n", []string{
			`line 2: resources[0]: match is required`, `line 2: resources[0]: namespace is required`, `line 2: resources[0]: action is required`}},
		{"resource glob class of slash", "resources:\n  - {match: \"a://[/]\", namespace: n, action: a}\n", []string{`line 2: resources[0].match: not a valid glob: the class at byte 4 matches only '/'`}},
		{"resource exact refused URI", "resources:\n  - {match: \"file:///a/../b\", namespace: n, action: a}\n",
			[]string{`line 2: resources[0].match: never applies: the proxy refuses a URI that has a '.' or '..' segment`}},
		{"resource exact encoded slash", "resources:\n  - {match: \"file:///a%2Fb\", namespace: n, action: a}\n",
			[]string{`line 2: resources[0].match: never applies: the proxy refuses a URI that holds a percent-encoded`}},
		{"resource exact shadowed", "resources:\n  - {match: \"demo://r/*\", namespace: n, action: a}\n  - {match: \"demo://r/x\", namespace: n, action: b}\n",
			[]string{`line 3: resources[1].match: "demo://r/x" never applies: resources[0] (match "demo://r/*", line 2) comes first and matches it`}},
		{"resource pattern twice", "resources:\n  - {match: \"demo://**\", namespace: n, action: a}\n  - {match: \"demo://**\", namespace: n, action: b}\n",
			[]string{`line 3: resources[1].match: "demo://**" never applies: resources[0]`}},
		{"resource namespace of tools", "resources:\n  - {match: \"a://*\", namespace: mcp, action: read}\n",
			[]string{`line 2: resources[0].namespace: mcp is the namespace of tools no rule maps; a resource rule must use another, so that a grant in mcp covers tools only`}},
		{"resource namespace of prompts", "resources:\n  - {match: \"a://*\", namespace: mcp-prompt, action: read}\n",
			[]string{`line 2: resources[0].namespace: mcp-prompt is the namespace of prompts no rule maps`}},
		{"tool namespace of resources", "tools:\n  - match: t\n    namespace: mcp-resource\n    action: a\n",
			[]string{`line 3: tools[0].namespace: mcp-resource is the namespace of resources no rule maps; a tool rule must use another, so that a grant in mcp-resource covers resources only`}},
		{"tool namespace of prompts", "tools:\n  - {match: t, namespace: mcp-prompt, action: get}\n", []string{`line 2: tools[0].namespace: mcp-prompt is the namespace of prompts`}},
		{"prompt namespace of resources", "prompts:\n  - {match: p, namespace: mcp-resource, action: read}\n", []string{`line 2: prompts[0].namespace: mcp-resource is the namespace of resources`}},
		{"prompts not a list", "prompts: simple-prompt\n", []string{`line 1: prompts: must be a list of rules`}},
		{"prompt rule typo", "prompts:\n  - {match: p, namespace: n, action: a, resorce: x}\n", []string{`line 2: prompts[0].resorce: unknown key; did you mean resource?`}},
		{"prompt resource mapping without arg", "prompts:\n  - {match: p, namespace: n, action: a, resource: {prefix: /x}}\n",
			[]string{`line 2: prompts[0].resource: arg is required: a JSON pointer such as /path to the argument holding the resource`}},
		{"prompt resource of another type", "prompts:\n  - {match: p, namespace: n, action: a, resource: 7}\n",
			[]string{`line 2: prompts[0].resource: must be a string (a literal) or a mapping {arg: JSON pointer, prefix: string}; leave it out to use the prompt's name`}},
		{"prompt resource number", "prompts:\n  - {match: p, namespace: n, action: a, resource: 5}\n", []string{`(YAML reads 5 as int; quote it to make it a string)`}},
		{"prompt resource empty", "prompts:\n  - {match: p, namespace: n, action: a, resource: \"\"}\n", []string{`line 2: prompts[0].resource: must not be empty`}},
		{"prompt exact shadowed", "prompts:\n  - {match: \"*-prompt\", namespace: n, action: a}\n  - {match: simple-prompt, namespace: n, action: b}\n",
			[]string{`line 3: prompts[1].match: "simple-prompt" never applies: prompts[0]`}},
		{"resources typo at top", "resource: []\n", []string{`line 1: resource: unknown key; did you mean resources?`}},
		{"prompts typo at top", "promts: []\n", []string{`line 1: promts: unknown key; did you mean prompts?`}},
		{"alias", "x_cost: &c 5\n", []string{`line 1: x_cost: unknown key`}},
		{"alias value", "tools:\n  - &r {match: t, namespace: n, action: a}\n  - {match: u, namespace: n, action: *r}\n",
			[]string{`line 3: tools[1].action: YAML aliases (*name) are not supported`}},
		{"merge key", "tools:\n  - {match: t, namespace: n, action: a}\n  - <<: {namespace: n}\n    match: u\n    action: a\n",
			[]string{`line 3: tools[1]: YAML merge keys (<<) are not supported`, `line 3: tools[1]: namespace is required`}},
		{"not a mapping", "- roots\n", []string{`line 1: the policy must be a mapping of keys (roots, tools,`}},
		{"scalar document", "hello\n", []string{`line 1: the policy must be a mapping of keys`}},
		{"non-string key", "5: x\n", []string{`line 1: keys must be plain names`}},
		{"syntax error", "roots: [\n", []string{`line 1, column 8: not valid YAML: did not find expected node content`}},
		{"tab indentation", "log:\n\tlevel: info\n", []string{`line 2, column 1: not valid YAML: found character that cannot start any token`}},
		{"reserved character", "roots: [a]\nlog: {file: @x}\n", []string{`line 2, column 13: not valid YAML: found character that cannot start any token`}},
		{"mapping in a value", "roots: []\nlog: a: b\n", []string{`line 2, column 7: not valid YAML: mapping values are not allowed in this context`}},
		{"unclosed flow mapping", "roots: []\ntools: [{match: a,\n", []string{`line 2, column 9: not valid YAML: did not find expected node content`}},
		{"indented key", "roots: []\n  tools: []\n", []string{`line 1, column 1: not valid YAML: did not find expected key`}},
		{"two documents", "roots: []\n---\ntools: []\n", []string{`line 2: a policy file holds one YAML document`}},
		{"upstream user with two colons", "upstream_user: a:b:c\n", []string{`line 1: upstream_user: must be USER or USER:GROUP (names or numeric IDs), e.g. nobody`}},
		{"upstream user without user", "upstream_user: \":g\"\n", []string{`line 1: upstream_user: must be USER or USER:GROUP`}},
		{"upstream user with empty group", "upstream_user: \"u:\"\n", []string{`line 1: upstream_user: must be USER or USER:GROUP`}},
		{"upstream user with a space", "upstream_user: \"no body\"\n", []string{`line 1: upstream_user: must be USER or USER:GROUP`}},
		{"upstream user as a number", "upstream_user: 65534\n", []string{`line 1: upstream_user: must be a string (YAML reads 65534 as int; quote it to make it a string)`}},
		{"several problems in order", "default_cost: -5\nlog:\n  level: loud\nmystery: 1\n", []string{
			`line 1: default_cost: must be`, `line 3: log.level: must be one of`, `line 4: mystery: unknown key`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.src), "/etc/dos")
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\ngot %+v", tt.src, p)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T %v is not Errors", err, err)
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(tt.want), lines(errs))
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}

func lines(errs Errors) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}

func TestParseReportsAtMostSomeProblems(t *testing.T) {
	src := strings.Repeat("x: 1\n", 200)
	_, err := Parse([]byte(src), "")
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != maxProblems {
		t.Fatalf("got %d problems, want %d", len(errs), maxProblems)
	}
	if !strings.HasSuffix(err.Error(), "(and 49 more problems)") {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestParseLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("tools:\n")
	for i := range MaxRules + 1 {
		b.WriteString("  - {match: t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + ", namespace: n, action: a}\n")
	}
	_, err := Parse([]byte(b.String()), "")
	if err == nil || !strings.Contains(err.Error(), "more than 1000 rules") {
		t.Errorf("Parse of %d rules: %v", MaxRules+1, err)
	}
	long := "tools:\n  - {match: " + strings.Repeat("a", MaxMatchLen+1) + ", namespace: n, action: a}\n"
	if _, err := Parse([]byte(long), ""); err == nil || !strings.Contains(err.Error(), "longer than 1024 bytes") {
		t.Errorf("Parse of a long match: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte("spend_store: spend.log\nlog:\n  file: ../proxy.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.SpendStore != filepath.Join(dir, "spend.log") || p.Log.File != filepath.Join(filepath.Dir(dir), "proxy.log") {
		t.Errorf("paths not resolved against the file's directory: %q %q", p.SpendStore, p.Log.File)
	}

	// A relative policy path still resolves to absolute paths.
	t.Chdir(dir)
	if p, err := Load("policy.yaml"); err != nil || p.SpendStore != filepath.Join(dir, "spend.log") {
		t.Errorf("Load(relative) = %q, %v", p.SpendStore, err)
	}

	if err := os.WriteFile(path, []byte("roots: []\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || err.Error() != path+":2: bogus: unknown key; known keys here: roots, tools, resources, prompts, default_cost, allow_unauthenticated, honour_upstream_cost, revocation_list, spend_store, max_frame_bytes, log, workspace, judge, reputation, upstream_user, rate, tool_pins, proxy_key, audit_log, receipts, ended_delegations, require_signature, methods, state_dir, ldp" {
		t.Errorf("Load error = %v", err)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.File != path || pe.Line != 2 || pe.Key != "bogus" {
		t.Errorf("errors.As(*Error) = %+v", pe)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("#"+strings.Repeat("x", MaxFileSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big) = %v", err)
	}
}

// A store that starts like a Redis URL but is not one is refused, not
// taken as a local file in place of the fleet's shared store.
func TestParseRedisURLTypos(t *testing.T) {
	for _, v := range []string{"redis:6379", "Redis://10.0.0.5:6379/0", "REDISS://h:1", "redis:///0", "rediss:/h"} {
		for _, key := range []string{"spend_store", "revocation_list", "ended_delegations"} {
			if _, err := Parse([]byte(key+": "+v+"\n"), "/d"); err == nil || !strings.Contains(err.Error(), "redis://") {
				t.Errorf("%s: %s: %v, want an error naming redis://", key, v, err)
			}
		}
	}
	p, err := Parse([]byte("spend_store: redis://10.0.0.5:6379/0\nrevocation_list: ./redis-list.json\n"), "/d")
	if err != nil || p.SpendStore != "redis://10.0.0.5:6379/0" || p.RevocationList != "/d/redis-list.json" {
		t.Fatalf("%+v %v", p, err)
	}
}
