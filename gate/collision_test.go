package gate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/redistest"
)

// Mallory, holding a root token of her own, delegates to B under the ID of
// A's delegation to B. Both are recorded; B's complete names the ID, and
// the proxy completes the delegation of B's session, never Mallory's by
// guess: without a binding it refuses as ambiguous.
func TestCompleteSharedIDToTheSameDelegatee(t *testing.T) {
	f := newDelegationFixture(t)
	bind := f.delegateB()
	mRoot, err := dct.Create(dct.CreateParams{
		Issuer: f.root, Delegatee: f.mallory.ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}},
		ContractID:   "ct_cccccccccccc", DelegationID: "del_cccccccccccc",
		MaxChainDepth: 2, MaxBudgetMicrocents: 10000, ExpiresAt: f.now.Add(2 * time.Hour), IssuedAt: f.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	mTok, err := dct.Attenuate(mRoot, dct.AttenuateParams{
		Attenuator: f.mallory, Delegatee: f.b.ID(), DelegationID: "del_bbbbbbbbbbbb", ContractID: "ct_dddddddddddd",
		Capabilities: &[]dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/*"}}, Now: f.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	mContract := newContract(t, f.mallory, "ct_dddddddddddd", f.now, 5000, "docs:read")
	res, mBind, err := f.d.Delegate(f.params(mContract, mTok, "del_bbbbbbbbbbbb", "del_cccccccccccc"))
	if err != nil || !res.Accepted {
		t.Fatalf("Mallory's delegate: %+v %v", res, err)
	}
	if mBind.DelegationKey == bind.DelegationKey {
		t.Fatal("two delegations share a key")
	}
	att := f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", `{"summary":"a long enough summary"}`, 0)
	if _, err := f.d.Complete(context.Background(), att); err == nil {
		t.Fatal("a complete that two delegations to B could mean was accepted unbound")
	}
	done, err := f.d.CompleteIn(context.Background(), att, bind)
	if err != nil || done.Status != "completed" {
		t.Fatalf("B's complete in her session: %+v %v", done, err)
	}
	for key, want := range map[string]chain.Status{bind.DelegationKey: chain.StatusCompleted, mBind.DelegationKey: chain.StatusActive} {
		if d, err := f.d.Chain.Get(key); err != nil || d.Status != want {
			t.Errorf("%s: %+v %v; want %s", key, d.Status, err, want)
		}
	}
	// The gate: A's token chain passes through the completed delegation,
	// Mallory's does not.
	if st, ended := f.d.Ended(dct.ChainLink{DelegationID: "del_bbbbbbbbbbbb", Key: mBind.DelegationKey}); ended {
		t.Errorf("Mallory's delegation ended (%s) with B's", st)
	}
	if _, ended := f.d.Ended(dct.ChainLink{DelegationID: "del_bbbbbbbbbbbb", Key: bind.DelegationKey}); !ended {
		t.Error("B's completed delegation is not ended")
	}
	if _, ended := f.d.Ended(dct.ChainLink{DelegationID: "del_bbbbbbbbbbbb"}); !ended {
		t.Error("a link without a key is not refused")
	}
	if _, err := f.d.Chain.Get("del_bbbbbbbbbbbb"); !errors.Is(err, chain.ErrAmbiguous) {
		t.Errorf("Get by the shared ID: %v", err)
	}
}

// An ending an older proxy shared by delegation ID still ends every
// delegation with that ID (the fleet fails closed until the entry is
// removed); one shared by key ends only its own.
func TestEndedReadsEndingsSharedByID(t *testing.T) {
	srv := redistest.Start(t)
	f := newDelegationFixture(t)
	// An older proxy recorded an ending of del_aaaaaaaaaaaa by ID.
	if err := srv.Client().HSet(context.Background(), "delegateos:ended", "del_aaaaaaaaaaaa", "revoked").Err(); err != nil {
		t.Fatal(err)
	}
	shared, err := chain.OpenShared(chain.NewMemory(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	f.d.Chain = shared
	bind := f.delegateB()
	if st, ended := f.d.Ended(dct.ChainLink{DelegationID: "del_aaaaaaaaaaaa", Key: f.aTok.DelegationKeys()[0]}); !ended || st != "revoked" {
		t.Errorf("an ending shared by ID: %q %v; want revoked", st, ended)
	}
	if st, ended := f.d.Ended(dct.ChainLink{DelegationID: "del_bbbbbbbbbbbb", Key: bind.DelegationKey}); ended {
		t.Errorf("B's delegation ended (%s)", st)
	}
}
