package revocation_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/revocation"
)

// A root revokes a delegation it made; a verifier reading the list file
// denies the token and every token attenuated from it.
func Example() {
	root, _ := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	alice, _ := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "alice")
	bob, _ := identity.FromSeed(bytes.Repeat([]byte{3}, 32), "bob")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: alice.ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/**"}},
		ContractID:   "ct_000000000001", DelegationID: "del_000000000001",
		MaxChainDepth: 2, MaxBudgetMicrocents: 1000, ExpiresAt: now.Add(time.Hour), IssuedAt: now,
	})
	if err != nil {
		log.Fatal(err)
	}
	toBob, err := dct.Attenuate(tok, dct.AttenuateParams{Attenuator: alice, Delegatee: bob.ID(), DelegationID: "del_000000000002", Now: now})
	if err != nil {
		log.Fatal(err)
	}

	dir, _ := os.MkdirTemp("", "revocation-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "revocations.json")

	// The root signs a revocation of the authority block, scope chain.
	entry, err := revocation.NewEntry(root, tok.RevocationIDs()[0], revocation.ScopeChain, now)
	if err != nil {
		log.Fatal(err)
	}
	if err := revocation.Append(path, entry); err != nil {
		log.Fatal(err)
	}

	// A long-running verifier follows the file: every verification looks
	// at it first.
	list, err := revocation.OpenFile(path)
	if err != nil {
		log.Fatal(err)
	}
	defer list.Close()
	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}, Revocations: list})
	if err != nil {
		log.Fatal(err)
	}
	req := dct.Request{Namespace: "docs", Action: "read", Resource: "/report", Now: now}
	_, err = v.Verify(tok.String(), req)
	fmt.Println("alice's token revoked:", errors.Is(err, dct.ErrRevoked))
	_, err = v.Verify(toBob.String(), req)
	fmt.Println("bob's token revoked:", errors.Is(err, dct.ErrRevoked))

	// A missing list is an error, not an empty list.
	_, err = revocation.Load(filepath.Join(dir, "revocatons.json"))
	fmt.Println("missing list is an error:", errors.Is(err, os.ErrNotExist))
	// Output:
	// alice's token revoked: true
	// bob's token revoked: true
	// missing list is an error: true
}

// Only a principal that signed the block, or a block before it, can revoke
// it: here bob, the last attenuator, tries to revoke alice's block.
func ExampleList_Revoked() {
	root, _ := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	alice, _ := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "alice")
	bob, _ := identity.FromSeed(bytes.Repeat([]byte{3}, 32), "bob")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A three-block token: the authority signed by root, then attenuations
	// signed by alice and by bob. (Real IDs come from dct.Token.RevocationIDs.)
	blockIDs := []string{
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA",
		"CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCA",
	}
	signers := []string{root.ID(), alice.ID(), bob.ID()}

	list := revocation.NewList()
	byBob, _ := revocation.NewEntry(bob, blockIDs[1], revocation.ScopeChain, now)
	_ = list.Add(byBob)
	_, revoked, _ := list.Revoked(blockIDs, signers)
	fmt.Println("revoked by bob:", revoked)

	byAlice, _ := revocation.NewEntry(alice, blockIDs[1], revocation.ScopeChain, now)
	_ = list.Add(byAlice)
	id, revoked, _ := list.Revoked(blockIDs, signers)
	fmt.Println("revoked by alice:", revoked, id == blockIDs[1])
	// Output:
	// revoked by bob: false
	// revoked by alice: true true
}
