//go:build unix

package proxy_test

// The fifth red team of issue 19's store history: attacks on the fourth
// red team's fixes (per-proxy and per-machine count fields, the machine's
// ID) that failed before a fix made here, or that held. Each says what was
// tried.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// RT5-1 (an attack on the R4-13 fix). R4-13 refuses a start when the
// machine's ID (machine-id) is deleted while a counts file names it; the
// ID overwritten with another valid one (a configuration tool templating
// the state directory, a clone "fixed" by giving it a new ID) passed: the
// counts file's machine counts were dropped as another machine's, so a
// rollback that another machine's calls took back up (R4-2) was missed
// again: 40 calls on 30. Now a start whose machine-id differs from the ID
// a counts file in the directory names is refused, naming both.
func TestE2EFaultMachineIDReplacedRefused(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	snap := f.snapshot()
	m, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	if err := os.WriteFile(filepath.Join(f.e.Dir, "state", "machine-id"), []byte("0123456789abcdef01234567\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.restore(snap)
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	k, _, _ := drain(t, p2.Connect(mcptest.SessionOptions{}), 10)
	p3 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(code int) bool { return code == 2 }})
	if p3.WaitExit(mcptest.WaitTimeout) {
		if msg := p3.Stderr.String(); !strings.Contains(msg, "machine-id") || !strings.Contains(msg, "0123456789abcdef01234567") {
			t.Errorf("the refusal does not name the replaced machine ID: %s", msg)
		}
		return
	}
	more, typ, detail := drain(t, p3.Connect(mcptest.SessionOptions{}), 40)
	total := n + m + k + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, total)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls and stopped, its machine-id was replaced, Redis went back to a snapshot of %d, machine 2 made %d: machine 1's restarted proxy forwarded %d more (%d on 30), then %s: %s; want a refused start or store_reset", n+m, n, k, more, total, typ, detail)
	}
}

// RT5-4 (the fourth red team's known limit "field growth"). Each proxy
// records its root delegation's count in the key's field p:NONCE, a new
// nonce per process, and nothing removed it: stdio proxies run one per
// MCP session, so a busy fleet grew one field per session, for ever, in
// one hash per root (five sessions, five fields; a million sessions, a
// hash of tens of megabytes that a noeviction Redis runs out of memory
// on). The cost per call stayed O(1) (the script reads only its own
// field). Now a proxy that exits removes its field (its counts are in
// the machine's field and counts file): only running and killed proxies
// leave one.
func TestE2EFaultProxyFieldsDoNotGrowPerSession(t *testing.T) {
	f := newStoreFleet(t)
	for i := range 5 {
		p, s := f.start(f.a, "", nil)
		if n, typ, detail := drain(t, s, 1); n != 1 {
			t.Fatalf("session %d: %s: %s", i, typ, detail)
		}
		f.settled()
		stopProxy(t, p)
	}
	ctx := context.Background()
	c := f.srv.Client()
	keys, err := c.Keys(ctx, "delegateos:spend:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the spend keys: %v %v", keys, err)
	}
	var fields []string
	for _, k := range keys {
		fs, err := c.HKeys(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range fs {
			if strings.HasPrefix(x, "p:") {
				fields = append(fields, k+" "+x)
			}
		}
	}
	if len(fields) != 0 {
		t.Errorf("five proxies ran one session each and exited: their fields are left in the store: %v", fields)
	}
	// The machine's field, which a restarted proxy checks, stays.
	_, s := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s, 1); n != 1 {
		t.Fatalf("a sixth session: %s: %s", typ, detail)
	}
}

// RT5-5 (the compare-and-set of R4-11 against a proxy's marks). A proxy
// of a machine that saw the store starts while its identity is gone
// (deleted alone): it marks every tree's stamp, then the identity. Its
// first pass over the stamps read the identity first (no operator's newer
// generation there) and then marked; an operator's store init --reset that
// ran in between (the relay holds the proxy's marks until it is done)
// restamped the trees, and the late marks landed on them: the operator's
// command said it succeeded while every tree of the fleet refused
// store_reset until it was run again.
func TestE2EFaultLateMarkAfterOperatorReset(t *testing.T) {
	f := newStoreFleet(t)
	p1, s1 := f.start(f.a, "", nil)
	n, _, _ := drain(t, s1, 10)
	f.settled()
	stopProxy(t, p1)
	ctx := context.Background()
	c := f.srv.Client()
	if err := c.Del(ctx, "delegateos:store").Err(); err != nil {
		t.Fatal(err)
	}
	g := newGateRelay(t, f.srv.Addr())
	// The marks of the stamps, after the scan that lists them.
	g.armClientSeq("delegateos:stamp:*", "delegateos:stamp:{")
	pol := f.policy("")
	pol.SpendStore = "redis://" + g.addr + "/0?read_timeout=120s&write_timeout=5s"
	// The machine's index, named by the relay's address (as R4-10).
	idx, _ := filepath.Glob(filepath.Join(f.e.Dir, "state", "redis-*.json"))
	for _, p := range idx {
		if !strings.HasSuffix(p, ".seen.json") {
			b, _ := os.ReadFile(p)
			os.WriteFile(rt4IndexPath(filepath.Join(f.e.Dir, "state"), g.addr), []byte(strings.Replace(string(b), f.srv.Addr(), g.addr, 1)), 0o600)
		}
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: f.a, WantExit: func(int) bool { return true }})
	select {
	case <-g.held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the proxy did not mark the stamps")
	}
	out, errs, code := mcptest.CLI(t, "store", "init", "--reset", "--store", f.srv.URL())
	if code != 0 {
		t.Fatalf("store init --reset: exit %d, %s%s", code, out, errs)
	}
	g.release()
	// The proxy's start ends once its marks were answered.
	p2.Connect(mcptest.SessionOptions{}).Call(t, "echo", map[string]any{"text": "after the marks"})
	pn := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
	more, typ, detail := drain(t, pn.Connect(mcptest.SessionOptions{}), 5)
	if more == 0 {
		st, _ := c.HGetAll(ctx, "delegateos:stamp:{"+f.e.Root.ID()+"}").Result()
		t.Errorf("%d calls, the store's identity lost, store init --reset run (exit 0) while a proxy marked the loss: a proxy then forwarded nothing (%s: %s), the tree's stamp %v; want the operator's reset to hold", n, typ, detail, st["reset"])
	}
}

// Held (tried by the fifth red team): the machine's copies of the
// revocation list (state directory, *.revocations.json) replaced by
// symbolic links to nothing while Redis keeps the list: the copies read
// as empty, but a proxy restarted on the machine still learns the
// revocation from the store and refuses the revoked token. (Un-revoking
// needs Redis to lose the entry too, and a write to the state directory,
// made 0700: the proxy's own user, who can edit the policy anyway.)
func TestE2EFaultRevocationCopySymlinkedAwayHeld(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	p, s := f.start(f.b, "", nil)
	s.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "B's call")
	if out, err := f.revokeB(f.url); err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out)
	}
	refusesB(t, s, "B's proxy")
	stopProxy(t, p)
	copies, _ := filepath.Glob(filepath.Join(f.e.Dir, "state", "*.revocations.json"))
	if len(copies) == 0 {
		t.Fatal("no copy of the revocation list in the state directory")
	}
	for _, c := range copies {
		if err := os.Remove(c); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(t.TempDir(), "nothing"), c); err != nil {
			t.Fatal(err)
		}
	}
	p2 := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.b, WantExit: func(int) bool { return true }})
	if !p2.WaitExit(mcptest.WaitTimeout) {
		refusesB(t, p2.Connect(mcptest.SessionOptions{}), "the proxy restarted with its copies symlinked away")
	}
}
