package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestPolicyScripts runs the scripts in testdata/policy: 'policy check' on
// good and bad files, and 'policy init' against a real MCP server over
// stdio (policy/internal/testupstream, built here; $TESTUPSTREAM names it).
func TestPolicyScripts(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is needed to build the test MCP server")
	}
	upstream := filepath.Join(t.TempDir(), "testupstream")
	build := exec.Command(goTool, "build", "-o", upstream, "github.com/delegateos/delegateos/policy/internal/testupstream")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test MCP server: %v\n%s", err, out)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/policy",
		Setup: func(e *testscript.Env) error {
			e.Setenv("TESTUPSTREAM", upstream)
			return nil
		},
	})
}
