//go:build linux

package proxy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A revocation list the proxy cannot write (as under systemd's
// ReadOnlyPaths=/etc/delegateos, here an immutable directory, which binds
// root too) is read at start as before, but the proxy warns at once that
// revocations sent to it will be refused, instead of answering "cannot be
// recorded" the first time one comes. (A workspace it cannot write stops
// it at start already.)
func TestE2EUnwritableStateWarnedAtStart(t *testing.T) {
	e := mcptest.NewEnv(t)
	etc := filepath.Join(t.TempDir(), "etc")
	ws := filepath.Join(t.TempDir(), "ws")
	for _, d := range []string{etc, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	revs := filepath.Join(etc, "revocations.json")
	mcptest.WriteFile(t, revs, "[]\n")
	pol := e.Policy()
	pol.RevocationList = revs
	pol.Extra = "workspace: " + ws + "\n"
	path := filepath.Join(t.TempDir(), "policy.yaml")
	mcptest.WriteFile(t, path, pol.YAML())
	for _, d := range []string{etc} {
		if out, err := exec.Command("chattr", "+i", d).CombinedOutput(); err != nil {
			t.Fatalf("chattr +i %s (the test needs a file system with the immutable flag, as ext4 has): %v %s", d, err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", d).Run() })
	}
	cmd := exec.Command(mcptest.Delegateos(t), "proxy", "--policy", path, "--", "cat")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the proxy did not start and end cleanly: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"msg":"the revocation list cannot be written by the proxy: revocations sent to it (delegateos/revoke, a peer's push) will be refused`,
		`"revocation_list":"` + revs + `"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the proxy's log does not say %s:\n%s", want, out)
		}
	}
	// Writable, the proxy says nothing of them.
	exec.Command("chattr", "-i", etc).Run()
	out, err = exec.Command(mcptest.Delegateos(t), "proxy", "--policy", path, "--", "cat").CombinedOutput()
	if err != nil || strings.Contains(string(out), "cannot be written") {
		t.Fatalf("writable state: %v\n%s", err, out)
	}
}
