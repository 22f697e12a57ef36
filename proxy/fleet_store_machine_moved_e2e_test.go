//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A new instance of the machine while one of its proxies runs (red team
// 6, RT6-5). The machine's state directory is moved to another disk
// (here: copied and its path, a symlink, pointed at the copy; an NFS or
// autofs remount that gives the filesystem a new device number is the
// same) while proxy 1 (a long-running serve, say) keeps running. A proxy
// started afterwards is a new instance of the machine, listed in
// machine-instances beside the old one, and takes the machine's field
// i:ID over, as a reboot does. Proxy 1 read machine-instances at its
// start: it must not refuse the tree's calls store_reset ("used by
// another host too": one host, nothing lost, the budget a third spent),
// telling the operator to remove a state directory for a fault that does
// not exist. Then the new proxy must go on too: both instances of the
// directory run on this host, and an earlier one writing after a later
// one is the proxy that kept running, not a copy elsewhere (the rank
// rule alone would refuse it).
//
// Held: on a field naming an instance its list does not, a proxy reads
// machine-instances again before refusing; and a running proxy whose
// directory is no longer the one at its path, finding the field raised
// by the instance of the directory now there, runs as that instance from
// then on, as a proxy started there does (so the new proxy never finds
// the earlier instance writing after its own). A copy of the directory
// at the same path in another container is never the directory at a
// proxy's path, and is refused
// (TestE2EFaultCloneInAnotherContainerAtTheSamePathRefused).
func TestE2EFaultRunningProxyGoesOnAfterItsDirMoved(t *testing.T) {
	f := newStoreFleet(t)
	base := t.TempDir()
	d1, d2, link := filepath.Join(base, "d1"), filepath.Join(base, "d2"), filepath.Join(base, "state")
	if err := os.Mkdir(d1, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(d1, link); err != nil {
		t.Fatal(err)
	}
	env := []string{"DELEGATEOS_STATE_DIR=" + link}
	p1 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: env})
	s1 := p1.Connect(mcptest.SessionOptions{})
	n, _, _ := drain(t, s1, 10)
	f.settled()
	mcptest.Eventually(t, "machine 1's counts kept", func() bool {
		m, _ := filepath.Glob(filepath.Join(d1, "*.seen.json"))
		if len(m) == 0 {
			return false
		}
		b, _ := os.ReadFile(m[0])
		return containsMSeen(b, n)
	})
	// The directory moved: copied, and its path pointed at the copy.
	copyStateDir(t, d1, d2)
	if err := os.Symlink(d2, link+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".new", link); err != nil {
		t.Fatal(err)
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Env: env})
	s2 := p2.Connect(mcptest.SessionOptions{})
	k, typ, detail := drain(t, s2, 5)
	if k != 5 {
		t.Fatalf("the proxy started after the move: %d calls, then %s: %s", k, typ, detail)
	}
	more, typ, detail := drain(t, s1, 5)
	if more != 5 {
		f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+k+more)
		t.Fatalf("machine 1's state directory moved while its proxy 1 ran, a proxy started since made %d calls: proxy 1 (%d calls before) then forwarded %d of 5 (%d of the 30 spent) and refused %s: %s; want all 5", k, n, more, n+k, typ, detail)
	}
	// Both instances of the directory now run on this host: the new
	// proxy goes on too (an earlier instance writing after a later one
	// is this host's proxy that kept running, not a copy elsewhere).
	last, typ, detail := drain(t, s2, 5)
	f.sameAsUpstreams([]*mcptest.Process{p1, p2}, n+k+more+last)
	if last != 5 {
		t.Errorf("after proxy 1 (the directory's earlier instance, still running) made %d calls, the proxy started after the move forwarded %d of 5 (%d of the 30 spent) and refused %s: %s; want all 5", more, last, n+k+more, typ, detail)
	}
}
