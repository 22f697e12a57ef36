package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// make demo (scripts/demo.sh) was silent for the minutes a first build
// takes, then narrated half a second of demo. It now says what it builds
// and how far it is before the demo starts; a warm run adds nothing but
// those lines.
func TestDemoScriptSaysWhatItBuilds(t *testing.T) {
	repo := mcptest.ModuleRoot(t)
	bin := t.TempDir()
	cmd := exec.Command(filepath.Join(repo, "scripts", "demo.sh"), "-dir", filepath.Join(t.TempDir(), "demo"))
	cmd.Env = append(os.Environ(), "DEMO_BIN="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/demo.sh: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for i, want := range []string{
		`^make demo: resolving the build's packages \(a first run downloads the Go modules it needs\)$`,
		`^make demo: building \S+/delegateos, \S+/docserver and \S+/demo \(a first build compiles up to \d{3,} packages: a few minutes; later ones reuse them\)$`,
	} {
		if i >= len(lines) || !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Fatalf("line %d of make demo is not %s:\n%s", i+1, want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^make demo: built in \d+s; running the demo\n\ndelegateos demo: one delegation`).Match(out) {
		t.Fatalf("make demo does not say it built before the demo starts:\n%s", out)
	}
	for _, b := range []string{"delegateos", "docserver", "demo"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Errorf("DEMO_BIN lacks %s: %v", b, err)
		}
	}
}

// The progress filter counts the packages go build -v names, a line per
// tenth of the total in a log and one line rewritten on a terminal, and
// passes everything else (errors) on to standard error.
func TestBuildProgress(t *testing.T) {
	script := filepath.Join(mcptest.ModuleRoot(t), "scripts", "buildprogress.awk")
	input := "runtime\ninternal/abi\n# example.com/broken\nbroken/x.go:3:1: undefined: y\ngolang.org/x/crypto/ed25519\nexample.com/broken\n"
	run := func(tty string) (string, string) {
		cmd := exec.Command("awk", "-v", "total=5", "-v", "tty="+tty, "-f", script)
		cmd.Stdin = strings.NewReader(input)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String()
	}
	out, errs := run("0")
	if want := "  compiled 1 of at most 5 packages\n  compiled 2 of at most 5 packages\n  compiled 3 of at most 5 packages\n  compiled 4 of at most 5 packages\n"; out != want {
		t.Errorf("in a log:\n%q\nwant\n%q", out, want)
	}
	if want := "# example.com/broken\nbroken/x.go:3:1: undefined: y\n"; errs != want {
		t.Errorf("passed on:\n%q\nwant\n%q", errs, want)
	}
	out, _ = run("1")
	if want := "\r  compiled 1 of at most 5 packages\r  compiled 2 of at most 5 packages\n\r  compiled 3 of at most 5 packages\r  compiled 4 of at most 5 packages"; !strings.HasPrefix(out, want) {
		t.Errorf("on a terminal:\n%q\nwant it to start with\n%q", out, want)
	}
}
