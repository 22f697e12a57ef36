//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/contract"
)

// TestCredentialIssueFIFOInWorkspace: a FIFO swapped in for the contract,
// the attestation or the chain log of a workspace is refused at once, not
// waited on forever.
func TestCredentialIssueFIFOInWorkspace(t *testing.T) {
	for _, which := range []string{"contract", "attestation", "chain log"} {
		dir := t.TempDir()
		receiptWorkspace(t, dir)
		ws := filepath.Join(dir, "ws")
		var path string
		switch which {
		case "contract":
			cs, err := contract.OpenDir(filepath.Join(ws, wsTaskContracts))
			if err != nil {
				t.Fatal(err)
			}
			if path, err = cs.Path("ct_b0b000000001"); err != nil {
				t.Fatal(err)
			}
		case "attestation":
			ids, err := filepath.Glob(filepath.Join(ws, wsAttestations, "att_*"))
			if err != nil || len(ids) != 1 {
				t.Fatalf("attestations %v %v", ids, err)
			}
			path = ids[0]
		case "chain log":
			path = filepath.Join(ws, wsDelegations)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		// A guard against the hang under test, not a measure of speed.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		bin, err := exec.LookPath("delegateos")
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, bin, "credential", "issue", "--key", "alice.key", "--kind", "delegation",
			"--workspace", "ws", "--delegation", "del_b0b000000001")
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput() // the exit status is checked below
		cancel()
		if ctx.Err() == context.DeadlineExceeded {
			t.Errorf("%s a FIFO: credential issue still waiting after 10 s", which)
			continue
		}
		if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), "regular file") {
			t.Errorf("%s a FIFO: exit %d: %s", which, code, out)
		}
	}
}
