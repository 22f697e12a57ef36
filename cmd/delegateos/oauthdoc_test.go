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
		scriptCommand(&script, c, fmt.Sprint(i), fmt.Sprintf("docs/oauth.md line %d", c.line))
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
