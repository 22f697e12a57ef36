//go:build unix

package proxy_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team 9 (rtstore9), RT9-1: the state directory's lock files
// (machine-instances.lock, counts-epoch.lock, each counts file's and each
// fold's .lock) were opened by lockWait with O_RDWR|O_CREATE, following a
// symbolic link: a lock file that is a link to a path outside the state
// directory made the proxy create (and flock) a file there — the one
// state-directory open that still followed links after RT6-3/RT7-7/RT7-8
// (every other state file is opened O_NOFOLLOW, a regular file only). A
// link to a FIFO or a device was opened and locked too.
//
// Broke before (the proxy started and created the link's target outside
// its directory); held: lock files are opened O_NOFOLLOW|O_NONBLOCK, a
// regular file only, and one that is not is refused naming it (the start
// fails, exit 2): the proxy creates nothing outside its directory.
func TestE2EFaultLockFileSymlinkOutsideRefused(t *testing.T) {
	for _, name := range []string{"machine-instances.lock", "counts-epoch.lock"} {
		t.Run(name, func(t *testing.T) {
			f := newStoreFleet(t)
			state := filepath.Join(f.e.Dir, "state")
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(t.TempDir(), "made-by-the-proxy")
			if err := os.Symlink(outside, filepath.Join(state, name)); err != nil {
				t.Fatal(err)
			}
			p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
			exited := p.WaitExit(mcptest.WaitTimeout)
			if _, err := os.Lstat(outside); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s a symbolic link to %s: the proxy made that file outside its state directory (err %v)", name, outside, err)
			}
			if !exited {
				p.Stdin.Close()
				p.WaitExit(mcptest.WaitTimeout)
				t.Fatalf("%s a symbolic link out of the state directory: the proxy started; want a refusal naming it", name)
			}
			if stderr := p.Stderr.String(); !strings.Contains(stderr, name) {
				t.Errorf("refused, but not naming %s: %s", name, stderr)
			}
		})
	}
}
