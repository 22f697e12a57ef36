//go:build unix

package proxy_test

// A fleet's store losing data (issue 19): the set of trees lost. An
// attack of the second red team of the store history, which held.

import (
	"context"
	"testing"

	"github.com/delegateos/delegateos/gate"
)

// Only the set of trees is lost: no spend is lost, so nothing is refused
// (no false store_reset), by the running proxy or a new one; a tree whose
// stamp is then deleted too is still found by the proxy that saw it.
// Tried by the second red team of issue 19's store history; the attack held (was TestRedTeam2HeldTreesSetLost).
func TestE2EFaultTreesSetLostRefusesNothing(t *testing.T) {
	f := newStoreFleet(t)
	_, s1 := f.start(f.a, "", nil)
	drain(t, s1, 5)
	f.settled()
	ctx := context.Background()
	c := f.srv.Client()
	if err := c.Del(ctx, "delegateos:trees").Err(); err != nil {
		t.Fatal(err)
	}
	if typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "running"})); typ != "" {
		t.Errorf("the running proxy after the trees set was lost: %s: %s", typ, detail)
	}
	_, s2 := f.start(f.a, "", nil)
	if typ, detail := denialData(s2.Call(t, "echo", map[string]any{"text": "new"})); typ != "" {
		t.Errorf("a new proxy after the trees set was lost: %s: %s", typ, detail)
	}
	if err := c.Del(ctx, "delegateos:stamp:{"+f.e.Root.ID()+"}").Err(); err != nil {
		t.Fatal(err)
	}
	if typ, detail := denialData(s1.Call(t, "echo", map[string]any{"text": "stamp gone"})); typ != string(gate.StoreReset) {
		t.Errorf("the stamp deleted too: %s: %s; want store_reset", typ, detail)
	}
}
