package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsOAuth runs every command docs/oauth.md shows, in order, in one
// shell, as TestREADME does for the README.
func TestDocsOAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin, work := t.TempDir(), t.TempDir()
	for _, pkg := range []string{"./cmd/delegateos", "./examples/docserver"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	cmds := readmeCommands(t, filepath.Join(repo, "docs", "oauth.md"))
	var script strings.Builder
	fmt.Fprintf(&script, "export PATH=%q:\"$PATH\"\n", bin)
	for i, c := range cmds {
		fmt.Fprintf(&script, "{ %s\n} >.out.%d 2>.err.%d\nrc=$?\ncat .out.%d .err.%d\n", c.text, i, i, i, i)
		fmt.Fprintf(&script, "if [ $rc -ne %d ]; then echo \"docs/oauth.md line %d exited $rc, want %d: %s\" >&2; exit 97; fi\n", c.wantExit, c.line, c.wantExit, shellQuoteForEcho(c.text))
		if c.wantOut != "" {
			fmt.Fprintf(&script, "grep -q %q .out.%d .err.%d || { echo \"docs/oauth.md line %d: output lacks %s\" >&2; exit 97; }\n", c.wantOut, i, i, c.line, c.wantOut)
		}
	}
	if len(cmds) < 10 {
		t.Fatalf("found only %d commands in docs/oauth.md; is it parsed right?", len(cmds))
	}
	cmd := exec.Command("bash", "-u", "-c", script.String())
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "DELEGATEOS_STATE_DIR="+filepath.Join(work, "state"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/oauth.md commands failed: %v\n%s", err, out)
	}
}
