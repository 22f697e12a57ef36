package proxy_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// jsSDKVersion is the @modelcontextprotocol/sdk version that
// interop/approval-js pins.
const jsSDKVersion = "1.32.2"

// jsApprover installs interop/approval-js's pinned packages once and
// returns its directory; without Node.js 20+ and npm the test fails.
func jsApprover(t *testing.T) string {
	t.Helper()
	return mcptest.NodePackages(t, "interop/approval-js", "@modelcontextprotocol/sdk", jsSDKVersion)
}

// jsReport is what approve.mjs writes.
type jsReport struct {
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Asked []struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	} `json:"asked"`
}

// runJSApprover runs the TypeScript SDK's client as the proxy's client:
// it answers approvals as mode says and calls tool with args.
func runJSApprover(t *testing.T, p *mcptest.Process, mode, tool string, args map[string]any) jsReport {
	t.Helper()
	dir := jsApprover(t)
	out := filepath.Join(t.TempDir(), "report.json")
	// The proxy's stdout reaches node through a pipe of our own, so that
	// node's exit does not wait on the proxy's.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(w, p.Stdout)
		w.Close()
	}()
	cmd := exec.Command("node", "approve.mjs", mode, out, tool, mcptest.MustJSON(args))
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout = r, p.Stdin
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	r.Close()
	if err != nil {
		t.Fatalf("node approve.mjs %s: %v\n%s", mode, err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("node approve.mjs %s wrote no report: %v\n%s", mode, err, stderr.String())
	}
	var rep jsReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	return rep
}

// TestApprovalTypeScriptSDK: the MCP TypeScript SDK's client, from npm,
// is asked for the approval and its answer decides the call: accept
// forwards it, decline and cancel refuse it, and a client without
// elicitation is refused without being asked.
func TestApprovalTypeScriptSDK(t *testing.T) {
	cases := []struct {
		mode   string
		typ    dct.DenialType // "" for an allowed call
		detail string
		asked  int
	}{
		{"accept", "", "", 1},
		{"decline", gate.ApprovalDeclined, "declined", 1},
		{"cancel", gate.ApprovalDeclined, "cancelled", 1},
		{"none", gate.ApprovalUnavailable, "elicitation capability", 0},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			r := newApprovalRun(t, "required")
			rep := runJSApprover(t, r.p, c.mode, "write_file", writeArgs("/project/ts.md"))
			if len(rep.Asked) != c.asked {
				t.Fatalf("asked %d times, want %d (report %+v)", len(rep.Asked), c.asked, rep)
			}
			if c.asked > 0 {
				if msg := rep.Asked[0].Message; !strings.Contains(msg, "tool write_file") || !strings.Contains(msg, "Cost: 100 microcents") {
					t.Errorf("approval message %q", msg)
				}
			}
			if c.typ == "" {
				if rep.Error != nil || rep.Result == nil || rep.Result.IsError {
					t.Fatalf("the approved call failed: %+v", rep)
				}
				if !r.written(t, "/project/ts.md") {
					t.Error("the approved call did not reach the upstream")
				}
				return
			}
			if rep.Error == nil || rep.Error.Code != gate.DenialCode {
				t.Fatalf("got %+v, want a %s denial", rep, c.typ)
			}
			var data struct {
				Type   dct.DenialType `json:"type"`
				Detail string         `json:"detail"`
			}
			if json.Unmarshal(rep.Error.Data, &data) != nil || data.Type != c.typ || !strings.Contains(data.Detail, c.detail) {
				t.Errorf("denial data %s, want type %s with %q", rep.Error.Data, c.typ, c.detail)
			}
			if r.written(t, "/project/ts.md") {
				t.Error("a refused call reached the upstream")
			}
		})
	}
}
