// Command library walks through delegateos as a Go library: it generates
// keys, mints a token, attenuates it twice, verifies requests against it,
// revokes a block of its chain and verifies again, printing what happens at
// each step. It exits with status 1 if any step does not turn out as the
// protocol says it must. See README.md in this directory.
package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/revocation"
)

func main() {
	if err := walk(os.Stdout, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "library:", err)
		os.Exit(1)
	}
}

// walk runs the example as of now, printing to w.
func walk(w io.Writer, now time.Time) error {
	step := func(s string) { fmt.Fprintf(w, "\n== %s\n", s) }

	step("1. Generate an Ed25519 key for the root and for each agent")
	keys := map[string]*identity.Keypair{}
	for _, name := range []string{"root", "alice", "bob", "carol"} {
		k, err := identity.Generate(rand.Reader, name)
		if err != nil {
			return err
		}
		keys[name] = k
		fmt.Fprintf(w, "%-5s %s\n", name, k.ID())
	}
	root, alice, bob, carol := keys["root"], keys["alice"], keys["bob"], keys["carol"]

	step("2. The root mints a token for alice")
	aliceTok, err := dct.Create(dct.CreateParams{
		Issuer:              root,
		Delegatee:           alice.ID(),
		Capabilities:        []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}},
		ContractID:          "ct_a1b2c3d4e5f6",
		DelegationID:        "del_a11ce0000001",
		MaxChainDepth:       2,
		MaxBudgetMicrocents: 1_000_000,
		IssuedAt:            now,
		ExpiresAt:           now.Add(time.Hour),
	})
	if err != nil {
		return err
	}
	if err := describe(w, aliceTok, keys); err != nil {
		return err
	}

	step("3. Alice attenuates it for bob: only /project/reports/**, a quarter of the budget")
	reports := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/reports/**"}}
	quarter := int64(250_000)
	bobTok, err := dct.Attenuate(aliceTok, dct.AttenuateParams{
		Attenuator: alice, Delegatee: bob.ID(), DelegationID: "del_b0b000000001",
		Capabilities: &reports, MaxBudgetMicrocents: &quarter, Now: now,
	})
	if err != nil {
		return err
	}
	if err := describe(w, bobTok, keys); err != nil {
		return err
	}

	step("4. Bob tries to give carol the whole project: refused, attenuation only narrows")
	everything := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}}
	_, err = dct.Attenuate(bobTok, dct.AttenuateParams{
		Attenuator: bob, Delegatee: carol.ID(), DelegationID: "del_ca4010000001", Capabilities: &everything, Now: now,
	})
	if err == nil {
		return errors.New("bob widened his token")
	}
	fmt.Fprintln(w, "refused:", err)

	step("5. Bob attenuates it for carol: one directory of reports, 50000 microcents, 10 minutes")
	q3 := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/reports/q3/*"}}
	slice := int64(50_000)
	soon := now.Add(10 * time.Minute)
	carolTok, err := dct.Attenuate(bobTok, dct.AttenuateParams{
		Attenuator: bob, Delegatee: carol.ID(), DelegationID: "del_ca4010000001",
		Capabilities: &q3, MaxBudgetMicrocents: &slice, ExpiresAt: &soon, Now: now,
	})
	if err != nil {
		return err
	}
	if err := describe(w, carolTok, keys); err != nil {
		return err
	}

	step("6. A service that trusts the root verifies carol's requests")
	// The revocation list starts empty; the verifier consults it on every
	// request, so what is added to it later takes effect at once.
	revoked := revocation.NewList()
	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}, Revocations: revoked})
	if err != nil {
		return err
	}
	svc := service{w: w, v: v, start: now}
	read := func(resource string, spent int64) dct.Request {
		return dct.Request{Namespace: "docs", Action: "read", Resource: resource, SpentMicrocents: spent, Now: now.Add(time.Minute)}
	}
	if err := svc.allowed("carol", carolTok, read("/project/reports/q3/summary.md", 20_000)); err != nil {
		return err
	}
	if err := svc.denied("carol", carolTok, read("/project/reports/q2/summary.md", 0), dct.ErrCapabilityNotGranted); err != nil {
		return err
	}
	if err := svc.denied("carol", carolTok, read("/project/reports/q3/summary.md", 50_000), dct.ErrBudgetExceeded); err != nil {
		return err
	}
	late := read("/project/reports/q3/summary.md", 0)
	late.Now = now.Add(11 * time.Minute)
	if err := svc.denied("carol", carolTok, late, dct.ErrExpired); err != nil {
		return err
	}

	step("7. Alice revokes her grant to bob (block 1), and everything built on it")
	entry, err := revocation.NewEntry(alice, carolTok.RevocationIDs()[1], revocation.ScopeChain, now.Add(2*time.Minute))
	if err != nil {
		return err
	}
	if err := revoked.Add(entry); err != nil {
		return err
	}
	fmt.Fprintf(w, "revoked %s (scope %s), signed by alice\n", entry.RevocationID, entry.Scope)

	step("8. Carol asks again, and so does bob: both revoked; alice's own token is untouched")
	after := read("/project/reports/q3/summary.md", 20_000)
	after.Now = now.Add(3 * time.Minute)
	if err := svc.denied("carol", carolTok, after, dct.ErrRevoked); err != nil {
		return err
	}
	if err := svc.denied("bob", bobTok, after, dct.ErrRevoked); err != nil {
		return err
	}
	// Alice's own token does not contain block 1.
	return svc.allowed("alice", aliceTok, after)
}

// describe prints who holds a token and what it grants, naming principals
// by their key's name.
func describe(w io.Writer, tok *dct.Token, keys map[string]*identity.Keypair) error {
	ins := tok.Inspect()
	ef := ins.Effective
	if ef == nil || !ins.SignaturesValid {
		return fmt.Errorf("a token this example made is not valid: %s%s", ins.SignatureProblem, ins.ChainProblem)
	}
	holder := ef.Holder
	for name, k := range keys {
		if k.ID() == ef.Holder {
			holder = name
		}
	}
	fmt.Fprintf(w, "a token of %d block(s), %d characters, held by %s\n", len(ins.Blocks), len(tok.String()), holder)
	fmt.Fprintf(w, "grants %v, %d microcents, until %s, depth %d of at most %d\n",
		ef.Capabilities, ef.MaxBudgetMicrocents, ef.ExpiresAt, ef.ChainDepth, ef.MaxChainDepth)
	return nil
}

// service verifies requests the way a service guarding the documents
// would, and prints each decision with who asked and when.
type service struct {
	w     io.Writer
	v     *dct.Verifier
	start time.Time
}

func (s service) line(who string, req dct.Request) string {
	return fmt.Sprintf("%-5s %s:%s %s, spent %d, at +%v:", who, req.Namespace, req.Action, req.Resource, req.SpentMicrocents, req.Now.Sub(s.start))
}

// allowed verifies a request that must be allowed and prints the scope.
func (s service) allowed(who string, tok *dct.Token, req dct.Request) error {
	scope, err := s.v.Verify(tok.String(), req)
	if err != nil {
		return fmt.Errorf("%s was denied: %w", s.line(who, req), err)
	}
	fmt.Fprintf(s.w, "%s ALLOWED, %d microcents left (delegation %s, a chain of %d)\n",
		s.line(who, req), scope.RemainingBudgetMicrocents, scope.DelegationID, len(scope.Chain))
	return nil
}

// denied verifies a request that must be denied with want and prints why.
func (s service) denied(who string, tok *dct.Token, req dct.Request, want error) error {
	_, err := s.v.Verify(tok.String(), req)
	if !errors.Is(err, want) {
		return fmt.Errorf("%s got %v, want %v", s.line(who, req), err, want)
	}
	fmt.Fprintf(s.w, "%s DENIED, %v\n", s.line(who, req), err)
	return nil
}
