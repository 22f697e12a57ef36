package mcplist

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcpdef"
)

// testUpstream builds policy/internal/testupstream, a small MCP server
// with five tools.
func testUpstream(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testupstream")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/delegateos/delegateos/policy/internal/testupstream").CombinedOutput()
	if err != nil {
		t.Fatalf("build the test MCP server: %v\n%s", err, out)
	}
	return bin
}

func TestList(t *testing.T) {
	bin := testUpstream(t)
	want := []string{"read_file", "fetch", "get_time", "count_lines", "open_resource"}
	for _, page := range []string{"0", "2"} {
		l, err := List([]string{bin, "-page-size", page}, Options{})
		if err != nil {
			t.Fatalf("page size %s: %v", page, err)
		}
		if got := l.ToolNames(); !reflect.DeepEqual(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("page size %s: tools %v, want %v", page, got, want)
		}
		for _, tl := range l.Tools {
			if tl.Name == "read_file" && tl.Description != "Read a file.\nReturns its text." {
				t.Errorf("read_file's definition: %+v", tl)
			}
		}
	}
	for _, c := range []struct {
		argv []string
		opts Options
		want string
	}{
		{[]string{bin, "-fail", "no database"}, Options{},
			`exited with status 3 during initialize; its last line on stderr: "no database"`},
		{[]string{"no-such-mcp-server-here"}, Options{},
			`upstream "no-such-mcp-server-here" could not start: exec: "no-such-mcp-server-here": executable file not found in $PATH`},
		{[]string{bin, "-hang"}, Options{Timeout: 500 * time.Millisecond},
			`testupstream -hang" did not answer initialize within 500ms: it does not speak MCP over standard input and output, so it is not an MCP server`},
		// Commands that are not MCP servers: one echoes the initialize
		// back, one exits at once.
		{[]string{"cat"}, Options{}, `upstream "cat" failed during initialize: method not found: No request handler configured; it does not speak MCP over standard input and output, so it is not an MCP server, or needs a flag to serve over stdio (such as --stdio); check the command after --`},
		{[]string{"true"}, Options{}, `; it does not speak MCP over standard input and output, so it is not an MCP server`},
	} {
		_, err := List(c.argv, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.argv, err, c.want)
		}
	}
	if _, err := List(nil, Options{}); err == nil {
		t.Error("List(nil) succeeded")
	}
}

// With Definitions, the prompts and resource templates are listed too,
// every entry kept as the server wrote it; a server that declares no
// prompts or resources is not asked for them.
func TestListDefinitions(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "docserver")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/delegateos/delegateos/examples/docserver").CombinedOutput(); err != nil {
		t.Fatalf("build the docserver: %v\n%s", err, out)
	}
	l, err := List([]string{bin, "--root", t.TempDir(), "--page-size", "1", "--describe", "greeting=Say \u2028hi"}, Options{Definitions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Raw[mcpdef.Tool]) != 4 || len(l.Tools) != 4 || len(l.Raw[mcpdef.Prompt]) != 2 || len(l.Raw[mcpdef.ResourceTemplate]) != 1 {
		t.Fatalf("listed %d tools (%d typed), %d prompts, %d templates", len(l.Raw[mcpdef.Tool]), len(l.Tools), len(l.Raw[mcpdef.Prompt]), len(l.Raw[mcpdef.ResourceTemplate]))
	}
	found := false
	for _, p := range l.Raw[mcpdef.Prompt] {
		found = found || strings.Contains(string(p), `"description":"Say `+"\u2028"+`hi"`) || strings.Contains(string(p), `"description":"Say \u2028hi"`)
	}
	if !found {
		t.Errorf("prompts %s", l.Raw[mcpdef.Prompt])
	}
	l, err = List([]string{testUpstream(t)}, Options{Definitions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Raw[mcpdef.Tool]) != 5 || l.Raw[mcpdef.Prompt] != nil || l.Raw[mcpdef.ResourceTemplate] != nil {
		t.Errorf("the test upstream: %d tools, prompts %s, templates %s", len(l.Raw[mcpdef.Tool]), l.Raw[mcpdef.Prompt], l.Raw[mcpdef.ResourceTemplate])
	}
}
