package chain_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// key derives a fixed key, so the example's tokens never change.
func key(b byte, name string) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		panic(err)
	}
	return k
}

func Example() {
	root, alice, bob, carol := key(1, "root"), key(2, "alice"), key(3, "bob"), key(4, "carol")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	// root delegates to alice, alice to bob and to carol.
	rootTok, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: alice.ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}},
		ContractID:   "ct_a1b2c3d4e5f6", DelegationID: "del_000000000001",
		MaxChainDepth: 2, MaxBudgetMicrocents: 1000, IssuedAt: now, ExpiresAt: now.Add(time.Hour),
	})
	if err != nil {
		panic(err)
	}
	bobTok, err := dct.Attenuate(rootTok, dct.AttenuateParams{Attenuator: alice, Delegatee: bob.ID(), DelegationID: "del_000000000002", Now: now})
	if err != nil {
		panic(err)
	}
	carolTok, err := dct.Attenuate(rootTok, dct.AttenuateParams{Attenuator: alice, Delegatee: carol.ID(), DelegationID: "del_000000000003", Now: now})
	if err != nil {
		panic(err)
	}

	// Record the delegations as they are made (after a dct.Verifier has
	// accepted each token).
	store := chain.NewMemory()
	rootRec, err := chain.NewRoot(rootTok, now)
	if err != nil {
		panic(err)
	}
	bobRec, err := chain.NewChild(rootRec, bobTok, now.Add(time.Minute))
	if err != nil {
		panic(err)
	}
	carolRec, err := chain.NewChild(rootRec, carolTok, now.Add(2*time.Minute))
	if err != nil {
		panic(err)
	}
	for _, d := range []chain.Delegation{rootRec, bobRec, carolRec} {
		if err := store.Insert(d); err != nil {
			panic(err)
		}
	}

	// bob finishes; then root withdraws alice's delegation, and with it
	// carol's, which is still active.
	if err := store.Complete(bobRec.ID, "att_0123456789ab", now.Add(10*time.Minute)); err != nil {
		panic(err)
	}
	revoked, err := store.Revoke(rootRec.ID, now.Add(20*time.Minute))
	if err != nil {
		panic(err)
	}
	// Revoke names what it changed by key; show each one's ID.
	var ids []string
	for _, key := range revoked {
		d, err := store.Get(key)
		if err != nil {
			panic(err)
		}
		ids = append(ids, d.ID)
	}
	fmt.Println("revoked:", ids)

	// Nothing may be delegated under a revoked delegation.
	dave := key(5, "dave")
	daveTok, err := dct.Attenuate(carolTok, dct.AttenuateParams{Attenuator: carol, Delegatee: dave.ID(), DelegationID: "del_000000000004", Now: now})
	if err != nil {
		panic(err)
	}
	daveRec, err := chain.NewChild(carolRec, daveTok, now.Add(30*time.Minute))
	if err != nil {
		panic(err)
	}
	fmt.Println("insert under carol:", store.Insert(daveRec))

	ds, _ := store.List()
	name := map[string]string{root.ID(): "root", alice.ID(): "alice", bob.ID(): "bob", carol.ID(): "carol"}
	for _, line := range chain.Text(chain.Tree(ds), func(id string) string { return name[id] }) {
		fmt.Println(line)
	}
	// Output:
	// revoked: [del_000000000001 del_000000000003]
	// insert under carol: delegation del_000000000004 breaks the parent_active invariant: its parent del_000000000003 is revoked; only an active delegation delegates
	// del_000000000001 root → alice  [revoked]  ct_a1b2c3d4e5f6  depth 0
	// ├─ del_000000000002 alice → bob  [completed]  ct_a1b2c3d4e5f6  depth 1  att_0123456789ab
	// └─ del_000000000003 alice → carol  [revoked]  ct_a1b2c3d4e5f6  depth 1
}
