package contract_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
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
	now   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// A delegator writes a contract, signs it and hands it out as JSON; the
// receiver parses and verifies it. Formatting does not matter: the
// signature covers the canonical form.
func Example() {
	c, err := contract.Create(root, contract.CreateParams{
		ID:           "ct_a1b2c3d4e5f6",
		Issuer:       root.DID(), // a did:key is accepted; the principal ID is recorded
		Title:        "Summarize the papers",
		Inputs:       json.RawMessage(`{"folder": "/project/papers", "maxWords": 500}`),
		OutputSchema: json.RawMessage(`{"type": "object", "required": ["summary"]}`),
		Verification: json.RawMessage(`{"method": "deterministic_check", "checkName": "string_length",
			"checkParams": {"field": "summary", "min": 1, "max": 5000}}`),
		MaxBudgetMicrocents:  5000,
		Deadline:             now.Add(24 * time.Hour),
		MaxChainDepth:        1,
		RequiredCapabilities: []string{"docs:read"},
	}, now)
	if err != nil {
		panic(err)
	}
	data, err := c.Marshal()
	if err != nil {
		panic(err)
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, data, "", "  ")

	received, err := contract.Parse(pretty.Bytes())
	if err != nil {
		panic(err)
	}
	fmt.Println(received.Verify())
	fmt.Println(received.Issuer == root.ID())
	fmt.Println(string(received.Task.Inputs))

	received.Constraints.MaxBudgetMicrocents = 50000
	fmt.Println(errors.Is(received.Verify(), contract.ErrInvalidSignature))
	// Output:
	// <nil>
	// true
	// {"folder":"/project/papers","maxWords":500}
	// true
}

// A token is bound to a contract when it names the contract and grants
// every required capability; the check runs on the scope a verifier
// returned, never on unverified token fields.
func ExampleCheckBinding() {
	c, err := contract.Create(root, contract.CreateParams{
		ID:                   "ct_a1b2c3d4e5f6",
		Title:                "Research",
		OutputSchema:         json.RawMessage(`{"type":"object"}`),
		Verification:         json.RawMessage(`{"method":"schema_match","schema":{"type":"object"}}`),
		Deadline:             now.Add(time.Hour),
		RequiredCapabilities: []string{"docs:read", "web:search"},
	}, now)
	if err != nil {
		panic(err)
	}
	tok, err := dct.Create(dct.CreateParams{
		Issuer:       root,
		Delegatee:    alice.ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}},
		ContractID:   c.ID,
		DelegationID: "del_000000000001",
		IssuedAt:     now,
		ExpiresAt:    now.Add(time.Hour),
	})
	if err != nil {
		panic(err)
	}
	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}})
	if err != nil {
		panic(err)
	}
	scope, err := v.VerifyChain(tok.Serialized().Token, now)
	if err != nil {
		panic(err)
	}
	err = contract.CheckBinding(c, scope)
	fmt.Println(err)
	fmt.Println(errors.Is(err, contract.ErrCapabilityMismatch))
	// Output:
	// capability_mismatch: contract ct_a1b2c3d4e5f6 requires web:search, which the token does not grant
	// true
}

// A directory store keeps one file per contract and never replaces one.
func ExampleDir() {
	path := tempDir()
	defer os.RemoveAll(path)
	dir, err := contract.OpenDir(path)
	if err != nil {
		panic(err)
	}
	c, err := contract.Create(root, contract.CreateParams{
		ID:           "ct_0123456789ab",
		Title:        "Count the words",
		OutputSchema: json.RawMessage(`{"type":"integer"}`),
		Verification: json.RawMessage(`{"method":"schema_match","schema":{"type":"integer","minimum":0}}`),
		Deadline:     now.Add(time.Hour),
	}, now)
	if err != nil {
		panic(err)
	}
	fmt.Println(dir.Put(c))
	ids, _ := dir.List()
	fmt.Println(ids)
	got, err := dir.Get("ct_0123456789ab")
	fmt.Println(got.Task.Title, err)
	// Output:
	// <nil>
	// [ct_0123456789ab]
	// Count the words <nil>
}

// tempDir makes a directory for an example.
func tempDir() string {
	d, err := os.MkdirTemp("", "contracts")
	if err != nil {
		panic(err)
	}
	return d
}
