package gate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/revocation"
)

// fileChain gives the fixture's Delegations a chain log at path, and
// returns a second Delegations on the same log: two proxies sharing a
// workspace.
func (f *delegationFixture) fileChain(path string) *Delegations {
	f.t.Helper()
	open := func() chain.Store {
		s, err := chain.OpenFile(path)
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { s.Close() })
		return s
	}
	f.d.Chain = open()
	return &Delegations{Verifier: f.d.Verifier, Chain: open(), Contracts: f.d.Contracts, Attestations: f.d.Attestations,
		Attest: f.d.Attest, RevocationList: f.d.RevocationList, Revocations: f.d.Revocations, Now: f.d.Now}
}

// link is the chain link the gate would give Delegations.Ended for the
// delegation recorded with an ID, or, for one not recorded, a link with a
// key of its own.
func (f *delegationFixture) link(id string) dct.ChainLink {
	if ds, err := f.d.Chain.WithID(id); err == nil && len(ds) == 1 {
		return dct.ChainLink{DelegationID: id, Key: ds[0].Key}
	}
	sum := sha256.Sum256([]byte(id))
	return dct.ChainLink{DelegationID: id, Key: base64.RawURLEncoding.EncodeToString(sum[:])}
}

// What one proxy records ended, another on the same log reports ended at
// its next look, whether it had looked before or not.
func TestEndedSeenByAnotherProxy(t *testing.T) {
	f := newDelegationFixture(t)
	other := f.fileChain(filepath.Join(t.TempDir(), "delegations.jsonl"))
	f.delegateB()
	for _, id := range []string{"del_aaaaaaaaaaaa", "del_bbbbbbbbbbbb", "del_000000000000", "del_cccccccccccc"} {
		if st, ended := other.Ended(f.link(id)); ended {
			t.Fatalf("%s ended (%s) before anything ended", id, st)
		}
	}
	if _, err := f.d.Complete(context.Background(), f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", `{"summary":"a long enough summary"}`, 10)); err != nil {
		t.Fatal(err)
	}
	if st, ended := other.Ended(f.link("del_bbbbbbbbbbbb")); !ended || st != "completed" {
		t.Fatalf("the other proxy's next look: %q %v", st, ended)
	}
	if st, ended := f.d.Ended(f.link("del_bbbbbbbbbbbb")); !ended || st != "completed" {
		t.Fatalf("the proxy's own look: %q %v", st, ended)
	}
	if _, ended := other.Ended(f.link("del_aaaaaaaaaaaa")); ended {
		t.Fatal("the delegator's delegation ended too")
	}
}

// A chain log that can no longer be read ends every delegation: the gate
// refuses rather than allows.
func TestEndedFailsClosed(t *testing.T) {
	f := newDelegationFixture(t)
	path := filepath.Join(t.TempDir(), "delegations.jsonl")
	other := f.fileChain(path)
	f.delegateB()
	if _, ended := other.Ended(f.link("del_bbbbbbbbbbbb")); ended {
		t.Fatal("ended before anything happened")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"del_bbbbbbbbbbbb", "del_cccccccccccc"} {
		if st, ended := other.Ended(f.link(id)); !ended || st == "" {
			t.Errorf("%s with the log gone: %q %v", id, st, ended)
		}
	}
}

// A block-scoped revocation of A's delegation revokes B's token, attenuated
// from it (DelegateOS §10.1), so the chain records A's delegation revoked
// with B's below it, and the message's reply names both.
func TestRevokeBlockScopeRevokesSubtree(t *testing.T) {
	f := newDelegationFixture(t)
	f.delegateB()
	e, err := revocation.NewEntry(f.root, f.aTok.RevocationIDs()[0], revocation.ScopeBlock, f.now)
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := json.Marshal(e)
	p, _ := json.Marshal(RevokeParams{Revocation: eb})
	res, err := f.d.Revoke(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Delegations) != 2 || res.Delegations[0] != "del_aaaaaaaaaaaa" || res.Delegations[1] != "del_bbbbbbbbbbbb" {
		t.Errorf("revoked %v; want A's delegation and B's", res.Delegations)
	}
	if _, err := f.d.Verifier.VerifyChain(f.bTok.String(), f.now); err == nil {
		t.Error("B's token still verifies")
	}
	for _, id := range []string{"del_aaaaaaaaaaaa", "del_bbbbbbbbbbbb"} {
		if st, ended := f.d.Ended(f.link(id)); !ended || st != "revoked" {
			t.Errorf("%s: %q %v", id, st, ended)
		}
	}
}
