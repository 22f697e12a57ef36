package serve_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revdist"
	"github.com/delegateos/delegateos/revocation"
)

// The systemd unit's situation: serve runs as an unprivileged user and
// the policy's directory is not writable by it (ProtectSystem=strict
// makes /etc read-only). A revocation list named relative to the policy
// is warned about at start, since pushed revocations cannot be recorded
// (and a push is refused and logged); with state_dir in the policy, the
// same relative name lives in the state directory, and a push is
// recorded.
func TestServeStateDirUnderAReadOnlyPolicyDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test starts delegateos serve as the user nobody, which needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("this test needs the user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	e := mcptest.NewEnv(t)
	// A tree nobody can read but not write: /etc/delegateos, and a
	// state directory it owns: /var/lib/delegateos.
	top, err := os.MkdirTemp("", "delegateos-statedir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	etc, state := filepath.Join(top, "etc"), filepath.Join(top, "state")
	for _, d := range []string{top, etc, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(top, "delegateos")
	b, err := os.ReadFile(mcptest.Delegateos(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{etc, state} {
		if err := os.WriteFile(filepath.Join(dir, "revocations.json"), []byte("[]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(state, "revocations.json"), uid, gid); err != nil {
		t.Fatal(err)
	}
	tok := e.Mint(nil, "mcp:echo:*")
	entry, err := revocation.NewEntry(e.Root, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	push, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "delegateos/revoke", "params": map[string]any{"revocation": entry}})

	for _, c := range []struct {
		name, extra  string
		warn         bool
		wantPush     string
		listRecorded string
	}{
		{"beside the policy", "", true, "cannot be recorded", ""},
		{"in state_dir", "state_dir: " + state + "\n", false, `"added":true`, filepath.Join(state, "revocations.json")},
	} {
		pol := e.Policy()
		pol.RevocationList = "revocations.json"
		pol.Extra = c.extra
		polPath := filepath.Join(etc, "policy.yaml")
		if err := os.WriteFile(polPath, []byte(pol.YAML()), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", "--policy", polPath, "--listen", "127.0.0.1:0", "--json", "--", "true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(os.Environ(), "DELEGATEOS_STATE_DIR="+state, "HOME=/nonexistent")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var where struct{ Address string }
		if err := json.NewDecoder(out).Decode(&where); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s: serve did not start: %v %s", c.name, err, stderr.String())
		}
		resp, err := http.Post("http://"+where.Address+revdist.Path, "application/json", bytes.NewReader(push))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		log := stderr.String()
		if got := strings.Contains(log, "a file the gate writes cannot be written"); got != c.warn {
			t.Errorf("%s: warned at start %v, want %v:\n%s", c.name, got, c.warn, log)
		}
		if !strings.Contains(string(body), c.wantPush) {
			t.Errorf("%s: push answered HTTP %d %s, want %s", c.name, resp.StatusCode, body, c.wantPush)
		}
		if c.warn && !strings.Contains(log, "revocation") {
			t.Errorf("%s: the refused push was not logged:\n%s", c.name, log)
		}
		if c.listRecorded != "" {
			b, _ := os.ReadFile(c.listRecorded)
			if !strings.Contains(string(b), tok.RevocationIDs()[0]) {
				t.Errorf("%s: the pushed revocation is not in %s: %s", c.name, c.listRecorded, b)
			}
		}
	}
}
