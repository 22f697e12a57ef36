package attest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/identity"
)

func key(b byte, name string) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		panic(err)
	}
	return k
}

var (
	root  = key(1, "root")
	alice = key(2, "alice")
	bob   = key(3, "bob")
	now   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// newContract signs a contract asking for {"summary": string} of at least
// 10 characters.
func newContract(issuer *identity.Keypair, id string, budget int64) *contract.TaskContract {
	c, err := contract.Create(issuer, contract.CreateParams{
		ID:           id,
		Title:        "Summarize the papers",
		OutputSchema: json.RawMessage(`{"type":"object","required":["summary"]}`),
		Verification: json.RawMessage(`{"method":"deterministic_check","checkName":"string_length",
			"checkParams":{"field":"summary","min":10}}`),
		MaxBudgetMicrocents: budget,
		Deadline:            now.Add(24 * time.Hour),
	}, now)
	if err != nil {
		panic(err)
	}
	return c
}

// Alice attests the work she did under root's contract; a verifier checks
// the attestation against the contract.
func Example() {
	contracts := &contract.Memory{}
	c := newContract(root, "ct_a1b2c3d4e5f6", 5000)
	if err := contracts.Put(c); err != nil {
		panic(err)
	}

	a, err := attest.Create(alice, attest.CreateParams{
		ID:             "att_000000000001",
		ContractID:     c.ID,
		DelegationID:   "del_000000000001",
		Success:        true,
		Output:         json.RawMessage(`{"summary":"Three papers, one result."}`),
		CostMicrocents: 1200,
		DurationMs:     5300,
	}, now.Add(time.Hour))
	if err != nil {
		panic(err)
	}

	v := &attest.Verifier{Contracts: contracts, Now: func() time.Time { return now.Add(2 * time.Hour) }}
	report, err := v.Verify(context.Background(), a)
	fmt.Println(report.Verdict, err)
	for _, s := range report.Steps {
		fmt.Println(s.Name, s.Status)
	}

	a.Result.CostMicrocents = 120 // a changed record no longer verifies
	report, err = v.Verify(context.Background(), a)
	fmt.Println(report.Verdict, errors.Is(err, attest.ErrInvalid))
	// Output:
	// passed <nil>
	// signature ok
	// contract ok
	// output_schema ok
	// verification ok
	// budget ok
	// outcome skipped
	// timing ok
	// deadline ok
	// children skipped
	// invalid true
}

// Alice delegated part of the work to bob under a contract she issued; her
// attestation lists bob's, and a verifier follows it. Bob's output does
// not meet his contract, so alice's work does not pass either.
func Example_recursive() {
	contracts, attestations := &contract.Memory{}, &attest.Memory{}
	contracts.Put(newContract(root, "ct_000000000001", 5000))
	contracts.Put(newContract(alice, "ct_000000000002", 1000))

	child, err := attest.Create(bob, attest.CreateParams{
		ID:             "att_0000000000b0",
		ContractID:     "ct_000000000002",
		DelegationID:   "del_000000000002",
		Success:        true,
		Output:         json.RawMessage(`{"summary":"tl;dr"}`),
		CostMicrocents: 400,
	}, now.Add(time.Hour))
	if err != nil {
		panic(err)
	}
	attestations.Put(child)
	parent, err := attest.Create(alice, attest.CreateParams{
		ID:             "att_0000000000a0",
		ContractID:     "ct_000000000001",
		DelegationID:   "del_000000000001",
		Success:        true,
		Output:         json.RawMessage(`{"summary":"Three papers, one result."}`),
		CostMicrocents: 1000, // her own spend and bob's 400
		Children:       []string{child.ID},
	}, now.Add(2*time.Hour))
	if err != nil {
		panic(err)
	}

	v := &attest.Verifier{Contracts: contracts, Attestations: attestations, Now: func() time.Time { return now.Add(3 * time.Hour) }}
	report, err := v.Verify(context.Background(), parent)
	fmt.Println(err)
	fmt.Println(report.Children[0].AttestationID, report.Children[0].Verdict)
	// Output:
	// attestation att_0000000000a0: failed: children failed (child att_0000000000b0 failed)
	// att_0000000000b0 failed
}
