package examples

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
)

const everythingPkg = "@modelcontextprotocol/server-everything"

// Costs in examples/everything/policy.yaml.
const (
	echoCost     = 100
	sumCost      = 250
	longCost     = 1000
	samplingCost = 20000
)

// The tools a token granting demo:*:* sees, and the ones it must not.
var (
	demoTools = []string{"echo", "get-annotated-message", "get-resource-links", "get-resource-reference",
		"get-structured-content", "get-sum", "get-tiny-image", "simulate-research-query",
		"toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation"}
	// Offered to clients that declare sampling, elicitation and roots.
	clientTools = []string{"get-roots-list", "trigger-elicitation-request", "trigger-sampling-request"}
	adminTools  = []string{"get-env", "gzip-file-as-resource"}
)

type everythingFixture struct {
	dir    string // a copy of examples/everything with root trusted
	root   principal
	policy string
}

func newEverythingFixture(t *testing.T) *everythingFixture {
	t.Helper()
	f := &everythingFixture{root: keygen(t, t.TempDir(), "root")}
	f.dir = exampleDir(t, "everything", f.root.id)
	f.policy = filepath.Join(f.dir, "policy.yaml")
	return f
}

func (f *everythingFixture) connect(t *testing.T, token string, opts ...client.ClientOption) *session {
	t.Helper()
	return connect(t, startProxy(t, f.policy, token, serverCommand(everythingPkg, "stdio")), opts...)
}

// connectOwnStore connects a proxy with a spend store of its own: only one
// proxy at a time may hold a spend store.
func (f *everythingFixture) connectOwnStore(t *testing.T, token string, opts ...client.ClientOption) *session {
	t.Helper()
	store := filepath.Join(t.TempDir(), "spend.log")
	return connect(t, startProxy(t, f.policy, token, serverCommand(everythingPkg, "stdio"), "--spend-store", store), opts...)
}

// TestEverythingToolsList: the list is filtered to the token's grants, and
// a hidden tool called by name is refused with what was granted.
func TestEverythingToolsList(t *testing.T) {
	t.Parallel()
	f := newEverythingFixture(t)
	tmp := t.TempDir()

	demo := cap{"demo", "*", "*"}
	s := f.connect(t, mint(t, tmp, f.root, 1_000_000, demo.String()),
		client.WithSamplingHandler(&mcptest.Sampler{}), client.WithElicitationHandler(mcptest.Elicitor{Decline: true}), client.WithRootsHandler(mcptest.ProjectRoots))
	if got := s.toolNames(t); !slices.Equal(got, demoTools) {
		t.Errorf("tools/list for demo:*:* = %v\nwant %v", got, demoTools)
	}
	d := s.deny(t, "get-env", map[string]any{})
	checkDenial(t, "get-env", d, "capability_not_granted", cap{"admin", "env", "*"}, demo)
	d = s.deny(t, "trigger-sampling-request", map[string]any{"prompt": "hi"})
	checkDenial(t, "trigger-sampling-request", d, "capability_not_granted", cap{"client", "sample", "*"}, demo)
	url := "https://raw.githubusercontent.com/modelcontextprotocol/servers/refs/heads/main/README.md"
	d = s.deny(t, "gzip-file-as-resource", map[string]any{"data": url})
	checkDenial(t, "gzip-file-as-resource", d, "capability_not_granted", cap{"net", "fetch", url}, demo)
	if got := text(t, s.call(t, "echo", map[string]any{"message": "hello"})); got != "Echo: hello" {
		t.Errorf("echo = %q", got)
	}

	// Everything, given every grant: the whole list, nothing filtered.
	all := f.connectOwnStore(t, mint(t, tmp, f.root, 1_000_000, "*:*:*"),
		client.WithSamplingHandler(&mcptest.Sampler{}), client.WithElicitationHandler(mcptest.Elicitor{Decline: true}), client.WithRootsHandler(mcptest.ProjectRoots))
	if got, want := all.toolNames(t), sorted(demoTools, clientTools, adminTools); !slices.Equal(got, want) {
		t.Errorf("tools/list for *:*:* = %v\nwant %v", got, want)
	}

	// A URL outside the grant is refused before the server fetches it.
	grant := cap{"net", "fetch", "https://example.com/**"}
	net := f.connectOwnStore(t, mint(t, tmp, f.root, 1_000_000, grant.String()))
	if got := net.toolNames(t); !slices.Equal(got, []string{"gzip-file-as-resource"}) {
		t.Errorf("tools/list for %v = %v", grant, got)
	}
	d = net.deny(t, "gzip-file-as-resource", map[string]any{"data": url})
	checkDenial(t, "gzip-file-as-resource of another host", d, "capability_not_granted", cap{"net", "fetch", url}, grant)
	// The server has a default URL; the proxy cannot check what is not in
	// the call, so a call without one is refused.
	d = net.deny(t, "gzip-file-as-resource", map[string]any{})
	if d.Type != "capability_not_granted" || !strings.Contains(d.Detail, "/data") {
		t.Errorf("gzip-file-as-resource without data: %+v", d)
	}
}

// TestEverythingNotifications: what the server sends on its own crosses
// the proxy: its roots/list request to the client, list-changed
// notifications, and log messages.
func TestEverythingNotifications(t *testing.T) {
	t.Parallel()
	f := newEverythingFixture(t)
	s := f.connect(t, mint(t, t.TempDir(), f.root, 1_000_000, "demo:*:*"), client.WithRootsHandler(mcptest.ProjectRoots))

	// The server asks for the client's roots shortly after initialization.
	mcptest.Eventually(t, "roots/list from the server", func() bool { return slices.Contains(s.Wire.IncomingMethods(), "roots/list") })
	// It registers get-roots-list once it knows the client has roots.
	mcptest.Eventually(t, "notifications/tools/list_changed", func() bool {
		return s.sawNotification(string(mcp.MethodNotificationToolsListChanged))
	})
	s.call(t, "toggle-simulated-logging", map[string]any{})
	mcptest.Eventually(t, "a log message", func() bool { return s.sawNotification(string(mcp.MethodNotificationMessage)) })
	// Stopped again, or its timer keeps the server from exiting with its
	// input closed.
	if got := text(t, s.call(t, "toggle-simulated-logging", map[string]any{})); !strings.Contains(got, "Stopped") {
		t.Errorf("toggle-simulated-logging = %q", got)
	}
}

// TestEverythingBudget: calls are charged the policy's cost, budget_exceeded
// arrives exactly at the boundary, and the spend survives a restart of the
// proxy because the example policy keeps it in a spend store.
func TestEverythingBudget(t *testing.T) {
	t.Parallel()
	f := newEverythingFixture(t)
	demo := cap{"demo", "*", "*"}
	// Four sums (4×250) and one echo (100) fit exactly.
	const budget = 4*sumCost + echoCost
	token := mint(t, t.TempDir(), f.root, budget, demo.String())
	s := f.connect(t, token)

	// A second proxy on the same spend store starts: the embedded store is
	// shared by every proxy on the machine (docs/shared-store.md).
	second := append([]string{"proxy", "--policy", f.policy, "--token", token, "--"}, serverCommand(everythingPkg, "stdio")...)
	if out, errOut, code := mcptest.CLI(t, second...); code != 0 || strings.Contains(out+errOut, "in use") {
		t.Errorf("a second proxy on the same spend store: exit status %d\n%s%s", code, out, errOut)
	}

	for i := range 4 {
		res := s.call(t, "get-sum", map[string]any{"a": i, "b": 1})
		if want := fmt.Sprintf("The sum of %d and 1 is %d.", i, i+1); text(t, res) != want {
			t.Errorf("get-sum = %q, want %q", text(t, res), want)
		}
	}
	// 1000 spent: a fifth sum would make 1250 > 1100.
	d := s.deny(t, "get-sum", map[string]any{"a": 1, "b": 1})
	checkDenial(t, "the fifth get-sum", d, "budget_exceeded", cap{"demo", "compute", "*"}, demo)
	if !strings.Contains(d.Detail, "costs 250") || !strings.Contains(d.Detail, "spent 1000 of 1100") {
		t.Errorf("budget denial detail = %q", d.Detail)
	}
	// The refused call was not charged: an echo still fits, exactly.
	s.call(t, "echo", map[string]any{"message": "last"})
	// Now spent == budget: even a free call is refused.
	d = s.deny(t, "get-tiny-image", map[string]any{})
	checkBudgetDenial(t, "a free call with nothing left", d, cap{"demo", "read", "*"}, demo)
	d = s.deny(t, "echo", map[string]any{"message": "over"})
	checkBudgetDenial(t, "echo over budget", d, cap{"demo", "echo", "*"}, demo)
	// The proxy flushes its log as it exits.
	s.Close()
	if !s.Process.WaitExit(20 * time.Second) {
		t.Fatal("the proxy did not exit within 20s of the client closing")
	}
	var settled float64
	for _, l := range s.logLines("decision") {
		if l["allowed"] == true {
			settled += l["cost"].(float64)
		}
	}
	if settled != budget {
		t.Errorf("the proxy settled %v microcents, want %d", settled, budget)
	}

	// A new proxy reads the spend store: the budget is still used up.
	again := f.connect(t, token)
	d = again.deny(t, "get-tiny-image", map[string]any{})
	checkBudgetDenial(t, "after a restart", d, cap{"demo", "read", "*"}, demo)
}

// TestEverythingProgress: the long-running tool's progress notifications
// cross the proxy, tagged with the client's progress token, and the call is
// charged once when it ends.
func TestEverythingProgress(t *testing.T) {
	t.Parallel()
	f := newEverythingFixture(t)
	long := cap{"demo", "long_running", "*"}
	s := f.connect(t, mint(t, t.TempDir(), f.root, longCost, long.String()))

	req := mcptest.CallRequest("trigger-long-running-operation", map[string]any{"duration": 0.4, "steps": 4})
	req.Params.Meta = &mcp.Meta{ProgressToken: "op-1"}
	res, err := s.CallTool(mcptest.Context(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "Long running operation completed. Duration: 0.4 seconds, Steps: 4." {
		t.Errorf("result = %q", got)
	}
	// Notifications and the response travel the same pipe in order, but
	// mcp-go's client hands notifications to a goroutine.
	mcptest.Eventually(t, "4 progress notifications", func() bool { return len(s.Progress("op-1")) >= 4 })
	for i, p := range s.Progress("op-1") {
		if p["progress"] != float64(i+1) || p["total"] != float64(4) {
			t.Errorf("progress notification %d = %v", i, p)
		}
	}
	// The budget was exactly one long operation.
	d := s.deny(t, "trigger-long-running-operation", map[string]any{"duration": 0.1, "steps": 1})
	checkBudgetDenial(t, "a second long operation", d, cap{"demo", "long_running", "*"}, long)
}

// TestEverythingSampling: the server asks the client's LLM
// (sampling/createMessage) in the middle of a gated call; the request
// crosses the proxy to the client and the answer goes back.
func TestEverythingSampling(t *testing.T) {
	t.Parallel()
	f := newEverythingFixture(t)
	h := &mcptest.Sampler{}
	grant := cap{"client", "sample", "*"}
	s := f.connect(t, mint(t, t.TempDir(), f.root, samplingCost, grant.String()), client.WithSamplingHandler(h))

	if got := s.toolNames(t); !slices.Equal(got, []string{"trigger-sampling-request"}) {
		t.Errorf("tools/list for client:sample:* = %v", got)
	}
	res := s.call(t, "trigger-sampling-request", map[string]any{"prompt": "what is 6×7?"})
	if got := text(t, res); !strings.Contains(got, "answer to: Resource trigger-sampling-request context: what is 6×7?") {
		t.Errorf("trigger-sampling-request = %q", got)
	}
	if got := s.Wire.IncomingMethods(); !slices.Contains(got, "sampling/createMessage") {
		t.Errorf("server-to-client requests = %v, want sampling/createMessage", got)
	}
	d := s.deny(t, "trigger-sampling-request", map[string]any{"prompt": "again"})
	checkBudgetDenial(t, "a second sampling call", d, cap{"client", "sample", "*"}, grant)
	if n := len(h.Seen()); n != 1 {
		t.Errorf("the client's LLM was asked %d times, want 1", n)
	}
}

// checkBudgetDenial is checkDenial for budget_exceeded.
func checkBudgetDenial(t *testing.T, what string, d denial, requested cap, granted ...cap) {
	t.Helper()
	checkDenial(t, what, d, "budget_exceeded", requested, granted...)
}

// TestEverythingExampleFiles: the committed policy passes policy check and
// the client configuration runs the proxy with it in front of the pinned
// server on stdio.
func TestEverythingExampleFiles(t *testing.T) {
	t.Parallel()
	pc := checkExampleFiles(t, "everything", everythingPkg, 11)
	if !slices.Equal(pc.upstreamArgs, []string{"stdio"}) {
		t.Errorf("the server's arguments are %q, want [stdio]", pc.upstreamArgs)
	}
}

// TestEverythingREADME follows the README: its commands set up the keys,
// the policy, the token and the client configuration; the configured
// command (with the pinned local install instead of npx) then serves a
// client that can sample, progress crosses, the spend is charged, and the
// README's revocation cuts the agent off while the proxy runs.
func TestEverythingREADME(t *testing.T) {
	t.Parallel()
	workdir, pc := followREADMEConfig(t, "everything", everythingPkg, nil)

	h := &mcptest.Sampler{}
	s := connect(t, mcptest.Start(t, pc.local(everythingPkg), mcptest.StartOptions{}), client.WithSamplingHandler(h))
	if got, want := s.toolNames(t), sorted(demoTools, []string{"trigger-sampling-request"}); !slices.Equal(got, want) {
		t.Errorf("tools/list = %v\nwant %v", got, want)
	}
	req := mcptest.CallRequest("trigger-long-running-operation", map[string]any{"duration": 0.2, "steps": 2})
	req.Params.Meta = &mcp.Meta{ProgressToken: 7}
	if _, err := s.CallTool(mcptest.Context(t), req); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "2 progress notifications", func() bool { return len(s.Progress(float64(7))) == 2 })
	s.call(t, "trigger-sampling-request", map[string]any{"prompt": "hello"})
	if len(h.Seen()) != 1 {
		t.Errorf("the client's LLM was asked %d times, want 1", len(h.Seen()))
	}
	d := s.deny(t, "get-env", map[string]any{})
	checkDenial(t, "get-env", d, "capability_not_granted", cap{"admin", "env", "*"}, cap{"demo", "*", "*"}, cap{"client", "*", "*"})

	// 100000 - 1000 - 20000 = 79000 left: three more sampling requests
	// fit, a fourth does not, an echo still does.
	for range 3 {
		s.call(t, "trigger-sampling-request", map[string]any{"prompt": "again"})
	}
	d = s.deny(t, "trigger-sampling-request", map[string]any{"prompt": "one too many"})
	checkBudgetDenial(t, "a fifth sampling request", d, cap{"client", "sample", "*"}, cap{"demo", "*", "*"}, cap{"client", "*", "*"})
	if !strings.Contains(d.Detail, "has spent 81000 of 100000") {
		t.Errorf("budget denial detail = %q", d.Detail)
	}
	s.call(t, "echo", map[string]any{"message": "still fits"})

	runShell(t, workdir, t.TempDir(), readmeBlocks(t, "everything", "revoke"))
	mcptest.Eventually(t, "the revocation to reach the running proxy", func() bool {
		return s.revoked(t, "get-tiny-image", map[string]any{})
	})
}

// TestEverythingResourcesAndPrompts: the server's resources, templates,
// prompts and completions are gated by the example policy's resources:
// and prompts: rules, and the lists show what the token may use.
func TestEverythingResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	f := newEverythingFixture(t)
	tmp := t.TempDir()
	start := func(token string) *mcptest.Raw {
		t.Helper()
		store := filepath.Join(t.TempDir(), "spend.log")
		c := startProxy(t, f.policy, token, serverCommand(everythingPkg, "stdio"), "--spend-store", store).Raw()
		c.Initialize()
		return c
	}
	request := func(c *mcptest.Raw, id, method, params string) mcptest.RawMessage {
		t.Helper()
		c.Send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
		return c.Response(id)
	}
	denied := func(what string, m mcptest.RawMessage, typ, needs string) {
		t.Helper()
		var d denial
		if m.Error != nil {
			_ = json.Unmarshal(m.Error.Data, &d)
		}
		if m.Error == nil || m.Error.Code != -32001 || d.Type != typ || !strings.Contains(m.Error.Message, needs) {
			t.Errorf("%s was answered %s %+v; want a %s denial naming %q", what, m.Result, m.Error, typ, needs)
		}
	}
	names := func(m mcptest.RawMessage, list, key string) []string {
		t.Helper()
		if m.Error != nil {
			t.Fatalf("%s: %+v", list, m.Error)
		}
		var r map[string][]map[string]any
		if err := json.Unmarshal(m.Result, &r); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range r[list] {
			out = append(out, fmt.Sprint(e[key]))
		}
		slices.Sort(out)
		return out
	}
	const static = "demo://resource/static/document/"

	// Documents and the three plain prompts, not the generated resources.
	c := start(mint(t, tmp, f.root, 1_000_000, "demo:document:*", "demo:prompt:*"))
	uris := names(request(c, "1", "resources/list", `{}`), "resources", "uri")
	if len(uris) == 0 {
		t.Fatal("resources/list shows no documents")
	}
	for _, u := range uris {
		if !strings.HasPrefix(u, static) {
			t.Errorf("resources/list shows %s, which the token cannot read", u)
		}
	}
	if got := names(request(c, "2", "resources/templates/list", `{}`), "resourceTemplates", "uriTemplate"); len(got) != 0 {
		t.Errorf("resources/templates/list shows %v; the token cannot read what they make", got)
	}
	if got, want := names(request(c, "3", "prompts/list", `{}`), "prompts", "name"), []string{"args-prompt", "completable-prompt", "simple-prompt"}; !slices.Equal(got, want) {
		t.Errorf("prompts/list = %v, want %v", got, want)
	}
	if m := request(c, "4", "resources/read", `{"uri":"`+uris[0]+`"}`); m.Error != nil || !strings.Contains(string(m.Result), `"text"`) {
		t.Errorf("reading %s: %s %+v", uris[0], clipped(m.Result), m.Error)
	}
	denied("reading a generated resource", request(c, "5", "resources/read", `{"uri":"demo://resource/dynamic/text/1"}`),
		"capability_not_granted", "resource demo://resource/dynamic/text/1 needs demo:generate:demo://resource/dynamic/text/1")
	if m := request(c, "6", "prompts/get", `{"name":"simple-prompt"}`); m.Error != nil {
		t.Errorf("simple-prompt: %+v", m.Error)
	}
	denied("resource-prompt", request(c, "7", "prompts/get", `{"name":"resource-prompt","arguments":{"resourceType":"Text","resourceId":"1"}}`),
		"capability_not_granted", "prompt resource-prompt needs demo:generate:demo://resource/dynamic/**")
	if m := request(c, "8", "completion/complete", `{"ref":{"type":"ref/prompt","name":"completable-prompt"},"argument":{"name":"department","value":"E"}}`); m.Error != nil {
		t.Errorf("completing completable-prompt: %+v", m.Error)
	}
	denied("completing a template's argument", request(c, "9", "completion/complete", `{"ref":{"type":"ref/resource","uri":"demo://resource/dynamic/text/{resourceId}"},"argument":{"name":"resourceId","value":"1"}}`),
		"capability_not_granted", "needs demo:generate:")

	// With demo:generate too: the templates, generated resources and
	// resource-prompt.
	g := start(mint(t, tmp, f.root, 1_000_000, "demo:document:*", "demo:prompt:*", "demo:generate:demo://resource/dynamic/**"))
	if got := names(request(g, "1", "resources/templates/list", `{}`), "resourceTemplates", "uriTemplate"); len(got) != 2 {
		t.Errorf("resources/templates/list = %v, want the two dynamic templates", got)
	}
	if m := request(g, "2", "resources/read", `{"uri":"demo://resource/dynamic/text/1"}`); m.Error != nil {
		t.Errorf("reading a generated resource with demo:generate: %+v", m.Error)
	}
	if m := request(g, "3", "prompts/get", `{"name":"resource-prompt","arguments":{"resourceType":"Text","resourceId":"1"}}`); m.Error != nil {
		t.Errorf("resource-prompt with demo:generate: %+v", m.Error)
	}

	// No token: nothing is read, and the lists are empty.
	n := start("")
	denied("reading without a token", request(n, "1", "resources/read", `{"uri":"`+uris[0]+`"}`), "malformed_token", "no DCT")
	denied("a prompt without a token", request(n, "2", "prompts/get", `{"name":"simple-prompt"}`), "malformed_token", "no DCT")
	if got := names(request(n, "3", "resources/list", `{}`), "resources", "uri"); len(got) != 0 {
		t.Errorf("resources/list without a token = %v", got)
	}
}

func clipped(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
