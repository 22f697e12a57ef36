//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// An operator accepts the loss of another fleet's tree (store init
// --reset --root OTHER) while proxy 1 runs on machine 1 calling its own
// tree T, and proxy 2 on the same machine, calling the other tree,
// writes the counts file under the new generation. The attack (red team
// 6) was that proxy 1 stays on the old generation, so its last counts
// are "older" than the file, left out of it, and its live record
// removed at its clean exit. It holds: the operator's new generation
// restamps every tree, so proxy 1 adopts it at its next call; its last
// 10 calls reach the counts file, and after Redis goes back to before
// them its restart refuses store_reset.
func TestE2EFaultOtherRootsResetKeepsARunningProxysCounts(t *testing.T) {
	f := newStoreFleet(t)
	o := f.otherRoot()
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	seenFile := f.seenFiles()[0]
	gen := func() (int64, int64) {
		b, _ := os.ReadFile(seenFile)
		var st struct {
			Gen  int64            `json:"gen"`
			Seen map[string]int64 `json:"seen"`
		}
		json.Unmarshal(b, &st)
		var top int64
		for _, v := range st.Seen {
			top = max(top, v)
		}
		return st.Gen, top
	}
	mcptest.Eventually(t, "machine 1's counts kept", func() bool { _, c := gen(); return c == n })
	g0, _ := gen()
	// Proxy 2, same machine, the other fleet's tree.
	env := []string{"DELEGATEOS_STATE_DIR=" + f.e.Dir + "/state"}
	p2 := o.e.StartProxy(mcptest.ProxyOptions{Policy: o.policy(""), Token: o.a, Env: env})
	s2 := p2.Connect(mcptest.SessionOptions{})
	if k, typ, detail := drain(t, s2, 1); k != 1 {
		t.Fatalf("proxy 2's call: %s: %s", typ, detail)
	}
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.url, "--reset", "--root", o.e.Root.ID()); code != 0 {
		t.Fatalf("store init --reset --root OTHER: %d %s %s", code, out, errs)
	}
	if k, typ, detail := drain(t, s2, 1); k != 1 {
		t.Fatalf("proxy 2's call after the operator's reset: %s: %s", typ, detail)
	}
	o.settled() // its commit, in the background, ends its reservation before the snapshot
	mcptest.Eventually(t, "the counts file under the new generation", func() bool { g, c := gen(); return g > g0 && c == n })
	snap := f.snapshot()
	m, typ, detail := drain(t, s1, 10)
	if m != 10 {
		t.Fatalf("proxy 1's calls on its tree after the other tree's reset: %d, then %s: %s", m, typ, detail)
	}
	f.settled()
	stopProxy(t, p1)
	f.restore(snap)
	p3, s3 := f.start(f.a, "", nil)
	more, typ, detail := drain(t, s3, 40)
	total := n + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p3}, total)
	stopProxy(t, p2)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1's proxy 1 made %d calls (the last %d under the generation before an operator's reset of another tree), exited cleanly, Redis went back to %d: its restart forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, m, n, more, total, typ, detail)
	}
}
