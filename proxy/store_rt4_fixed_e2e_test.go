//go:build unix

package proxy_test

// Findings of the fourth red team of issue 19's store history that are
// fixed (store_rt4_broke_e2e_test.go, build tag redteam, holds those still
// open). Each failed before its fix.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// R4-5. The machine's index of the store exists but cannot be read (a
// symbolic link to itself: ELOOP; another user's file: EACCES) while it
// can be replaced. It was taken as none: after a restart of Redis without
// persistence the restarted proxy made a new identity and spent the
// budget again (40 on 30). Now the proxy refuses to start, naming the
// file.
func TestE2EFaultUnreadableIndexRefused(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	idx, _ := filepath.Glob(filepath.Join(f.e.Dir, "state", "redis-*.json"))
	cut := 0
	for _, p := range idx {
		if strings.HasSuffix(p, ".seen.json") {
			continue
		}
		os.Remove(p)
		if err := os.Symlink(filepath.Base(p), p); err != nil {
			t.Fatal(err)
		}
		cut++
	}
	if cut != 1 {
		t.Fatalf("indexes: %v", idx)
	}
	f.srv.RestartEmpty()
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if !p2.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("the proxy started on an index of the store's identity that cannot be read")
	}
	if msg := p2.Stderr.String(); !strings.Contains(msg, "cannot be read") {
		t.Errorf("the refusal does not say the index cannot be read: %s", msg)
	}
}
