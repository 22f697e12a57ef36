//go:build unix

package proxy_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// Red team (issue 26.1), fixed: store recover --workspace republished the ended
// delegations of the fleet's workspaces by ID (chain.RepublishEnded shared
// d.ID), and an ID entry in the set is a legacy entry that ends every
// delegation with that ID (Shared.StatusByID). So once a sybil has
// completed her own delegation under the victim's ID, any recovery of the
// set ends the victim's delegation at every proxy: exactly the collision
// delegation keys were meant to prevent.
func TestE2ERecoverRepublishesEndingsByKey(t *testing.T) {
	srv := redistest.Start(t)
	r := newDelegationRun(t)
	start := func(ws string) (*mcptest.Process, *mcptest.Session) {
		revs := filepath.Join(r.e.Dir, filepath.Base(ws)+"-revocations.json")
		mcptest.WriteFile(t, revs, "[]\n")
		pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
		pol.Rules = pol.Rules[1:]
		pol.RevocationList = revs
		key := mcptest.NewKey(t, filepath.Base(ws))
		pol.Extra = "workspace: " + strconv.Quote(ws) + "\nended_delegations: " + strconv.Quote(srv.URL()) +
			"\nproxy_key: " + r.e.KeyFile(key) + "\naudit_log: " + filepath.Join(ws+"-audit.log") + "\n"
		p := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	ws1 := filepath.Join(r.e.Dir, "ws1")
	ws2 := filepath.Join(r.e.Dir, "ws2")
	r.p, r.s = start(ws1)
	r.ws = ws1
	_, other := start(ws2)
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	read := func(s *mcptest.Session, tok *dct.Token) mcptest.Result {
		return s.CallAs(t, tok.String(), "read_file", map[string]any{"path": "/project/sub/notes.md"})
	}
	read(r.s, r.bTok).OK(t, "the victim's call before the attack")
	sy := newSybil(t, r, delB)
	sy.recordAndComplete(sender(t, other))

	// The set loses its data; the operator recovers it from both workspaces.
	srv.FlushAll()
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", srv.URL(), "--root", r.e.Root.ID(),
		"--audit", ws1+"-audit.log", "--audit", ws2+"-audit.log", "--workspace", ws1, "--workspace", ws2)
	if code != 0 {
		t.Fatalf("store recover: exit %d, %s%s", code, out, errs)
	}
	fields, err := srv.Client().HKeys(context.Background(), "delegateos:ended").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f == delB {
			t.Errorf("store recover wrote the ended set entry %q: a delegation ID, which ends every delegation with it", f)
		}
	}
	// A proxy started after the recovery must still take the victim's token.
	_, fresh := start(filepath.Join(r.e.Dir, "ws3"))
	got := read(fresh, r.bTok)
	if typ, detail := denialData(got); got.Err != nil || got.RPC != nil || got.Res.IsError {
		t.Fatalf("the victim's call after store recover: %+v (%s: %s); the sybil's completion ended her delegation", got, typ, detail)
	}
	// ... and refuse the sybil's completed one.
	if got := read(fresh, sy.tok); got.Err == nil && got.RPC == nil && !got.Res.IsError {
		t.Fatalf("the sybil's completed token after store recover was allowed: %+v", got)
	}
}
