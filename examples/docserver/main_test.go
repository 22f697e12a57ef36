package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The tests run the server as a real subprocess speaking stdio: the test
// binary re-executes itself as docserver. That is how the proxy will meet it,
// the crash tool can really exit, and mcp-go's stdio server, which keeps its
// session in a package variable, gets a fresh process per test.
const serveEnv = "DOCSERVER_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// legacyVersion is the newest protocol version that still uses initialize
// and server-to-client requests. Without it mcp-go's client negotiates
// 2026-07-28, where sampling, roots and elicitation travel as input_required
// results and retries instead.
const legacyVersion = mcp.ProtocolVersion20251125

// session is a client of a docserver started by start.
type session struct {
	*mcptest.Session
	root string
	// frames counts the tools/call frames call sent.
	frames int
}

type startOptions struct {
	root        string // served directory; a fresh copy of testdata if empty
	diagnostics bool
	pageSize    string
	args        []string // further flags
	legacy      bool
	clientOpts  []client.ClientOption
	// wantExit is the exit status the server must end with; nil means 0.
	wantExit func(code int) bool
}

func start(t *testing.T, o startOptions) *session {
	t.Helper()
	if o.root == "" {
		o.root = t.TempDir()
		copyDir(t, "testdata", o.root)
	}
	argv := []string{os.Args[0], "--root", o.root}
	if o.diagnostics {
		argv = append(argv, "--diagnostics")
	}
	if o.pageSize != "" {
		argv = append(argv, "--page-size", o.pageSize)
	}
	argv = append(argv, o.args...)
	p := mcptest.Start(t, argv, mcptest.StartOptions{Env: []string{serveEnv + "=1"}, WantExit: o.wantExit})
	return &session{Session: p.Connect(mcptest.SessionOptions{Legacy: o.legacy, ClientOptions: o.clientOpts}), root: o.root}
}

// call calls a tool, failing the test if the call gets no result; the tool
// itself may fail.
func (s *session) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	r := s.Call(t, name, args)
	s.frames += r.Frames
	if r.Err != nil {
		t.Fatalf("%s: %v", name, r.Err)
	}
	return r.Res
}

func TestToolsList(t *testing.T) {
	docTools := []string{"list_files", "read_file", "search", "write_file"}
	allTools := []string{"big", "costly", "crash", "echo", "elicit", "list_files", "notify_list_changed", "probe",
		"read_file", "redefine", "roots", "sample", "search", "slow", "write_file"}

	for _, tt := range []struct {
		name string
		opts startOptions
		want []string
	}{
		{"documents", startOptions{}, docTools},
		{"diagnostics", startOptions{diagnostics: true}, allTools},
		{"legacy", startOptions{diagnostics: true, legacy: true}, allTools},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.opts)
			res, err := s.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := toolNames(res.Tools); !slices.Equal(got, tt.want) {
				t.Errorf("tools = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		s := start(t, startOptions{diagnostics: true, pageSize: "4"})
		var got []string
		pages := s.ToolPages(t)
		for i, page := range pages {
			if len(page) > 4 {
				t.Errorf("page %d has %d tools, want at most 4", i+1, len(page))
			}
			got = append(got, toolNames(page)...)
		}
		if len(pages) < 4 || !slices.Equal(got, allTools) {
			t.Errorf("%d pages listing %v; want every tool over at least 4 pages", len(pages), got)
		}
	})
}

func toolNames(tools []mcp.Tool) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	return names
}

func TestDocumentTools(t *testing.T) {
	s := start(t, startOptions{})

	tests := []struct {
		tool    string
		args    map[string]any
		want    string // the first text item, exactly
		isError bool
	}{
		{tool: "read_file", args: map[string]any{"path": "/project/sub/plan.md"}, want: mcptest.Fixture(t, "project/sub/plan.md")},
		{tool: "read_file", args: map[string]any{"path": "project/secret.md"}, want: mcptest.Fixture(t, "project/secret.md")},
		{tool: "read_file", args: map[string]any{"path": "/project/nope.md"}, want: "/project/nope.md: no such file or directory", isError: true},
		{tool: "read_file", args: map[string]any{"path": "/project/sub"}, want: "/project/sub: not a regular file", isError: true},
		{tool: "read_file", args: map[string]any{}, want: `required argument "path" not found`, isError: true},
		{tool: "list_files", args: map[string]any{}, want: "project/"},
		{tool: "list_files", args: map[string]any{"path": "/project"}, want: "README.md\nsecret.md\nsub/"},
		{tool: "list_files", args: map[string]any{"path": "/project/sub/"}, want: "notes.md\nplan.md"},
		{tool: "list_files", args: map[string]any{"path": "/project/README.md"}, want: "/project/README.md: not a directory", isError: true},
		{tool: "search", args: map[string]any{"query": "ATLAS"}, want: "/project/README.md:1: # Project Atlas\n/project/README.md:3: Atlas indexes the team's design notes so agents can answer questions about them.\n"},
		{tool: "search", args: map[string]any{"query": "weekly sync", "path": "/project/sub"}, want: "/project/sub/notes.md:1: # Weekly sync notes\n/project/sub/plan.md:6: 4. Tag the release and announce it in the weekly sync.\n"},
		{tool: "search", args: map[string]any{"query": "no such words"}, want: ""},
		{tool: "write_file", args: map[string]any{"path": "/project/drafts/new/idea.md", "content": "# Idea\n"}, want: "wrote 7 bytes to /project/drafts/new/idea.md"},
		{tool: "write_file", args: map[string]any{"path": "/project/sub/plan.md", "content": "replaced"}, want: "wrote 8 bytes to /project/sub/plan.md"},
		{tool: "write_file", args: map[string]any{"path": "/", "content": "x"}, want: "/: is the root directory", isError: true},
	}
	for _, tt := range tests {
		res := s.call(t, tt.tool, tt.args)
		if res.IsError != tt.isError || mcptest.Text(t, res, 0) != tt.want {
			t.Errorf("%s %v = %q (isError %v)\nwant %q (isError %v)", tt.tool, tt.args, mcptest.Text(t, res, 0), res.IsError, tt.want, tt.isError)
		}
	}

	got, err := os.ReadFile(filepath.Join(s.root, "project/drafts/new/idea.md"))
	if err != nil || string(got) != "# Idea\n" {
		t.Errorf("written file holds %q, %v", got, err)
	}
	if res := s.call(t, "read_file", map[string]any{"path": "/project/sub/plan.md"}); mcptest.Text(t, res, 0) != "replaced" {
		t.Errorf("overwritten file reads %q", mcptest.Text(t, res, 0))
	}

	res := s.call(t, "search", map[string]any{"query": "latency budget"})
	var structured struct {
		Matches   []match `json:"matches"`
		Truncated bool    `json:"truncated"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &structured); err != nil || len(structured.Matches) != 1 || structured.Matches[0].Path != "/project/sub/notes.md" {
		t.Errorf("search structuredContent = %s", raw)
	}
}

func TestPathEscapesRefused(t *testing.T) {
	root, outside := linkedRoot(t)
	s := start(t, startOptions{root: root})

	for _, tt := range []struct {
		tool string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "/../outside/secret.txt"}},
		{"read_file", map[string]any{"path": "../outside/secret.txt"}},
		{"read_file", map[string]any{"path": "/project/../../outside/secret.txt"}},
		{"read_file", map[string]any{"path": "/project/link-out.md"}},
		{"read_file", map[string]any{"path": "/project/abs-out.md"}},
		{"read_file", map[string]any{"path": "/project/dir-out/secret.txt"}},
		{"list_files", map[string]any{"path": "/project/dir-out"}},
		{"list_files", map[string]any{"path": "/.."}},
		{"write_file", map[string]any{"path": "/project/dir-out/planted.md", "content": "x"}},
		{"write_file", map[string]any{"path": "/../planted.md", "content": "x"}},
		{"search", map[string]any{"query": "outside", "path": "/project/dir-out"}},
		{"search", map[string]any{"query": "outside", "path": "/../outside"}},
	} {
		res := s.call(t, tt.tool, tt.args)
		if !res.IsError || !strings.HasSuffix(mcptest.Text(t, res, 0), errEscapesRoot.Error()) {
			t.Errorf("%s %v = %q (isError %v); want refusal", tt.tool, tt.args, mcptest.Text(t, res, 0), res.IsError)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("a write escaped: outside the root holds %d entries", len(entries))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "planted.md")); err == nil {
		t.Error("a write escaped to the root's parent")
	}
	res := s.call(t, "read_file", map[string]any{"path": "/project/link-in.md"})
	if res.IsError || mcptest.Text(t, res, 0) != mcptest.Fixture(t, "project/sub/notes.md") {
		t.Errorf("link inside the root: %q", mcptest.Text(t, res, 0))
	}
}

func TestEchoShowsRawParams(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			s := start(t, startOptions{diagnostics: true, legacy: legacy})
			dct := map[string]any{"token": "dct1.abc", "contractId": "c-7"}
			s.SetExtraParams(map[string]any{"_delegateos": dct})

			res := s.call(t, "echo", map[string]any{"text": "hello", "n": 1})
			if got := mcptest.Text(t, res, 0); got != "hello" {
				t.Errorf("echo text = %q", got)
			}
			var seen struct {
				Arguments map[string]any `json:"arguments"`
				Params    map[string]any `json:"params"`
			}
			if err := json.Unmarshal([]byte(mcptest.Text(t, res, 1)), &seen); err != nil {
				t.Fatal(err)
			}
			if want := map[string]any{"text": "hello", "n": 1.0}; !jsonEqual(seen.Arguments, want) {
				t.Errorf("arguments seen = %v, want %v", seen.Arguments, want)
			}
			if !jsonEqual(seen.Params["_delegateos"], dct) {
				t.Errorf("params seen = %v; want _delegateos %v", seen.Params, dct)
			}
			if seen.Params["name"] != "echo" {
				t.Errorf("params seen = %v; want name echo", seen.Params)
			}

			s.SetExtraParams(nil)
			res = s.call(t, "echo", map[string]any{"text": "again"})
			var again struct {
				Params map[string]any `json:"params"`
			}
			if err := json.Unmarshal([]byte(mcptest.Text(t, res, 1)), &again); err != nil {
				t.Fatal(err)
			}
			if _, ok := again.Params["_delegateos"]; ok || again.Params["name"] != "echo" {
				t.Errorf("params seen = %v; want no _delegateos this time", again.Params)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func eraName(legacy bool) string {
	if legacy {
		return "legacy-" + legacyVersion
	}
	return "modern-" + mcp.ProtocolVersion20260728
}

func TestSlowSendsProgress(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			s := start(t, startOptions{diagnostics: true, legacy: legacy})
			req := mcptest.CallRequest("slow", map[string]any{"steps": 3, "delay_ms": 10})
			req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
			res, err := s.CallTool(mcptest.Context(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := mcptest.Text(t, res, 0); got != "done 3" {
				t.Errorf("slow = %q", got)
			}
			// Notifications and the response leave the server on different
			// goroutines, so the last progress may arrive after the result.
			mcptest.Eventually(t, "3 progress notifications", func() bool { return len(s.Progress("tok-1")) == 3 })
			for i, p := range s.Progress("tok-1") {
				if p["progress"] != float64(i+1) || p["total"] != 3.0 {
					t.Errorf("progress %d = %v", i, p)
				}
			}

			res = s.call(t, "slow", map[string]any{"steps": 2, "delay_ms": 1})
			if got := mcptest.Text(t, res, 0); got != "done 2" {
				t.Errorf("slow without a token = %q", got)
			}
			time.Sleep(100 * time.Millisecond)
			if n := len(s.Progress(nil)); n != 3 {
				t.Errorf("%d progress notifications in all, want only tok-1's 3: a call without a progressToken got some", n)
			}
		})
	}
}

func TestSlowHonoursCancellation(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			s := start(t, startOptions{diagnostics: true, legacy: legacy})
			ctx, cancel := context.WithCancel(mcptest.Context(t))
			req := mcptest.CallRequest("slow", map[string]any{"steps": 1000, "delay_ms": 20})
			req.Params.Meta = &mcp.Meta{ProgressToken: 42}
			errc := make(chan error, 1)
			go func() {
				_, err := s.CallTool(ctx, req)
				errc <- err
			}()
			mcptest.Eventually(t, "first progress", func() bool { return len(s.Progress(42.0)) > 0 })
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled call returned %v", err)
			}
			// mcp-go's client sends notifications/cancelled; the server must stop.
			mcptest.Eventually(t, "the server to log the cancellation", func() bool {
				return strings.Contains(s.Process.Stderr.String(), "slow: cancelled")
			})
			n := len(s.Progress(42.0))
			time.Sleep(200 * time.Millisecond)
			if later := len(s.Progress(42.0)); later > n+1 || later > 900 {
				t.Errorf("progress went on after cancellation: %d then %d notifications", n, later)
			}
		})
	}
}

// TestRequestsToTheClient covers sample, roots and elicit in both protocol
// eras, and checks which one put a server-to-client request on the wire.
func TestRequestsToTheClient(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			sampler := &mcptest.Sampler{}
			s := start(t, startOptions{diagnostics: true, legacy: legacy, clientOpts: []client.ClientOption{
				client.WithSamplingHandler(sampler),
				client.WithRootsHandler(mcptest.ProjectRoots),
				client.WithElicitationHandler(mcptest.Elicitor{}),
			}})

			res := s.call(t, "sample", map[string]any{"prompt": "what is 6×7?"})
			if got := mcptest.Text(t, res, 0); res.IsError || got != "answer to: what is 6×7?" {
				t.Errorf("sample = %q (isError %v)", got, res.IsError)
			}
			if !slices.Equal(sampler.Seen(), []string{"what is 6×7?"}) {
				t.Errorf("sampling handler saw %q", sampler.Seen())
			}

			res = s.call(t, "roots", nil)
			if got := mcptest.Text(t, res, 0); got != `{"roots":[{"uri":"file:///work/project","name":"project"}]}` {
				t.Errorf("roots = %q", got)
			}

			res = s.call(t, "elicit", map[string]any{"message": "proceed?"})
			if got := mcptest.Text(t, res, 0); got != `{"action":"accept","content":{"answer":"yes to proceed?"}}` {
				t.Errorf("elicit = %q", got)
			}

			wantWire := []string(nil)
			if legacy {
				wantWire = []string{"sampling/createMessage", "roots/list", "elicitation/create"}
			}
			if got := s.Wire.IncomingMethods(); !slices.Equal(got, wantWire) {
				t.Errorf("server-to-client requests on the wire = %v, want %v", got, wantWire)
			}
			if got, want := s.frames, 3; !legacy {
				// Each call is answered input_required first, then retried.
				if got != 2*want {
					t.Errorf("%d tools/call frames sent, want %d", got, 2*want)
				}
			} else if got != want {
				t.Errorf("%d tools/call frames sent, want %d", got, want)
			}
		})
	}
}

func TestSampleWithoutHandlerFails(t *testing.T) {
	s := start(t, startOptions{diagnostics: true, legacy: true})
	_, err := s.CallTool(mcptest.Context(t), mcptest.CallRequest("sample", map[string]any{"prompt": "hi"}))
	if err == nil {
		t.Fatal("sample succeeded without a client sampling handler")
	}
}

func TestBig(t *testing.T) {
	s := start(t, startOptions{diagnostics: true})
	const size = 5 << 20
	res := s.call(t, "big", map[string]any{"bytes": size})
	got := mcptest.Text(t, res, 0)
	if len(got) != size || got != bigText(size) {
		t.Errorf("big returned %d bytes, want %d of the pattern", len(got), size)
	}
	res = s.call(t, "big", map[string]any{"bytes": maxBigBytes + 1})
	if !res.IsError {
		t.Error("big accepted more than the limit")
	}
}

func TestCrashFailsTheCall(t *testing.T) {
	s := start(t, startOptions{diagnostics: true, wantExit: func(code int) bool { return code == 3 }})
	_, err := s.CallTool(mcptest.Context(t), mcptest.CallRequest("crash", nil))
	if !errors.Is(err, transport.ErrTransportClosed) {
		t.Fatalf("crash: err = %v, want the transport closed", err)
	}
	if _, err := s.CallTool(mcptest.Context(t), mcptest.CallRequest("echo", map[string]any{"text": "x"})); err == nil {
		t.Error("a call after the crash succeeded")
	}
	mcptest.Eventually(t, "the crash to be logged", func() bool { return strings.Contains(s.Process.Stderr.String(), "exiting with status 3") })
}

func TestCostlyReportsCost(t *testing.T) {
	s := start(t, startOptions{diagnostics: true})
	for _, cost := range []int64{0, 1234, 1 << 40} {
		res := s.call(t, "costly", map[string]any{"cost": cost})
		if res.IsError || res.Meta == nil {
			t.Fatalf("costly %d = %+v", cost, res)
		}
		if got := res.Meta.AdditionalFields[costMetaKey]; got != float64(cost) {
			t.Errorf("costly %d: _meta[%s] = %v", cost, costMetaKey, got)
		}
	}
	for _, bad := range []any{-1, 1.5, "7", nil} {
		if res := s.call(t, "costly", map[string]any{"cost": bad}); !res.IsError {
			t.Errorf("costly accepted cost %v", bad)
		}
	}
}

func TestNotifyListChanged(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			s := start(t, startOptions{diagnostics: true, legacy: legacy})
			res := s.call(t, "notify_list_changed", nil)
			if res.IsError {
				t.Fatal(mcptest.Text(t, res, 0))
			}
			mcptest.Eventually(t, "notifications/tools/list_changed", func() bool {
				return len(s.Notifications(mcp.MethodNotificationToolsListChanged)) > 0
			})
		})
	}
}

// probe reports the process's identity and reads files anywhere, which is
// what it is for: showing what an upstream can reach.
func TestProbe(t *testing.T) {
	s := start(t, startOptions{diagnostics: true})
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("not a document"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := s.call(t, "probe", map[string]any{"paths": []string{outside, filepath.Join(t.TempDir(), "missing")}})
	if res.IsError {
		t.Fatal(mcptest.Text(t, res, 0))
	}
	var got struct {
		UID, PPID int
		Home, Cwd string
		Reads     []struct{ Path, Data, Error string }
	}
	if err := json.Unmarshal([]byte(mcptest.Text(t, res, 0)), &got); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if got.UID != os.Getuid() || got.PPID != os.Getpid() || got.Cwd != wd || got.Home != os.Getenv("HOME") {
		t.Errorf("identity: %+v", got)
	}
	if len(got.Reads) != 2 || got.Reads[0].Data != "not a document" || got.Reads[1].Error == "" || got.Reads[1].Data != "" {
		t.Errorf("reads: %+v", got.Reads)
	}
	if res := s.call(t, "probe", map[string]any{"paths": "x"}); !res.IsError {
		t.Error("probe accepted paths that are not a list")
	}
}
