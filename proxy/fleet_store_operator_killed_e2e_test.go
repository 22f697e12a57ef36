//go:build unix

package proxy_test

// Fourth red team of issue 19's store history: attacks that held, each
// kept as a test of what was tried.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// An operator's store recover or store init --reset killed (SIGKILL) at
// each of its steps: before it rebuilds the first key, before it restamps
// the trees, before it writes the store's new generation. Tried: whether
// any partial state lets a call through. Held: until the operator's
// command completes (run again), the running proxy and a proxy of a new
// machine refuse store_reset; run again, the recovery is exact (30 calls
// on 30) and init --reset lifts the refusal.
func TestE2EFaultOperatorKilledAtEachStep(t *testing.T) {
	steps := []struct{ name, pattern string }{
		{"before the first key is rebuilt", "'k:' .. k"},
		{"before the trees are restamped", "'HDEL', KEYS[1], 'reset'"},
		{"before the new generation is written", "lifted"},
	}
	for _, cmd := range []string{"recover", "init --reset"} {
		for _, st := range steps {
			if cmd != "recover" && st.name == "before the first key is rebuilt" {
				continue
			}
			t.Run(cmd+" killed "+st.name, func(t *testing.T) {
				f := newFleet(t, 30*fleetCost, 30*fleetCost, 30*fleetCost)
				log := filepath.Join(f.e.Dir, "audit.log")
				p, s := f.start(f.a, "proxy_key: "+f.e.KeyFile(mcptest.NewKey(t, "proxy"))+"\naudit_log: "+log+"\n", nil)
				n, _, _ := drain(t, s, 10)
				f.settled()
				if err := f.srv.Client().FlushAll(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
				if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "after the flush"})); typ != string(gate.StoreReset) {
					t.Fatalf("after the flush: %s: %s, want store_reset", typ, detail)
				}
				args := []string{"store", "recover", "--root", f.e.Root.ID(), "--audit", log}
				if cmd != "recover" {
					args = []string{"store", "init", "--reset"}
				}
				g := newGateRelay(t, f.srv.Addr())
				g.armClient(st.pattern)
				op := exec.Command(mcptest.Delegateos(t), append(args, "--store", "redis://"+g.addr+"/0")...)
				op.Env = append(os.Environ(), "DELEGATEOS_STATE_DIR="+t.TempDir())
				if err := op.Start(); err != nil {
					t.Fatal(err)
				}
				<-g.held
				op.Process.Kill()
				op.Wait()
				g.drop()
				if typ, detail := denialData(s.Call(t, "echo", map[string]any{"text": "operator killed"})); typ != string(gate.StoreReset) {
					t.Errorf("the running proxy after the operator's %s was killed %s: %s: %s, want store_reset", cmd, st.name, typ, detail)
				}
				pn := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Dir: t.TempDir()})
				if typ, detail := denialData(pn.Connect(mcptest.SessionOptions{}).Call(t, "echo", map[string]any{"text": "new machine"})); typ != string(gate.StoreReset) {
					t.Errorf("a new machine's proxy after the operator's %s was killed %s: %s: %s, want store_reset", cmd, st.name, typ, detail)
				}
				out, errs, code := mcptest.CLI(t, append(args, "--store", f.srv.URL())...)
				if code != 0 {
					t.Fatalf("store %s run again: exit %d, %s%s", cmd, code, out, errs)
				}
				more, typ, detail := drain(t, s, 40)
				f.sameAsUpstreams([]*mcptest.Process{p, pn}, n+more)
				if cmd == "recover" && (n+more != 30 || typ != string(dct.BudgetExceeded)) {
					t.Errorf("after the recovery run again: %d + %d forwarded, then %s: %s; want 30 on 30, budget_exceeded", n, more, typ, detail)
				}
				if cmd != "recover" && more == 0 {
					t.Errorf("after init --reset run again: nothing forwarded (%s: %s)", typ, detail)
				}
			})
		}
	}
}
