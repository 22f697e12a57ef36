package attest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/identity"
)

// Fixed keys and times make every test attestation deterministic.
var (
	rootKey  = testKey(1, "root")
	aliceKey = testKey(2, "alice")
	bobKey   = testKey(3, "bob")
	carolKey = testKey(4, "carol")
	evilKey  = testKey(6, "evil")

	// t0 is when the test contracts are made; attestations are made an hour
	// later, and the verifier's clock reads two hours later.
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

func testKey(b byte, name string) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		panic(err)
	}
	return k
}

const (
	rootContractID  = "ct_000000000001"
	childContractID = "ct_0000000000c1"
	testOutput      = `{"summary":"Quantum computers factor integers.","pages":3}`
	testSchema      = `{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"},"pages":{"type":"integer"}}}`
	testSpec        = `{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":10,"max":200}}`
)

// makeContract signs a contract with the standard schema and spec.
func makeContract(t testing.TB, issuer *identity.Keypair, id string, budget int64) *contract.TaskContract {
	t.Helper()
	c, err := contract.Create(issuer, contract.CreateParams{
		ID:                   id,
		Title:                "Summarize " + id,
		Inputs:               json.RawMessage(`{"topic":"quantum"}`),
		OutputSchema:         json.RawMessage(testSchema),
		Verification:         json.RawMessage(testSpec),
		MaxBudgetMicrocents:  budget,
		Deadline:             t0.Add(24 * time.Hour),
		MaxChainDepth:        2,
		RequiredCapabilities: []string{"docs:read"},
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testParams are the parameters of the standard attestation: alice did
// the root contract's work for 1000 microcents.
func testParams() CreateParams {
	return CreateParams{
		ID:             "att_a1b2c3d4e5f6",
		ContractID:     rootContractID,
		DelegationID:   "del_000000000001",
		Success:        true,
		Output:         json.RawMessage(testOutput),
		CostMicrocents: 1000,
		DurationMs:     1500,
	}
}

func create(t testing.TB, k *identity.Keypair, p CreateParams) *Attestation {
	t.Helper()
	a, err := Create(k, p, t1)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func testAttestation(t testing.TB) *Attestation { return create(t, aliceKey, testParams()) }

func mustMarshal(t testing.TB, a *Attestation) []byte {
	t.Helper()
	b, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func indent(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// world is a verifier with a contract store holding the root contract
// (issued by root, budget 5000) and the child contract (issued by alice,
// budget 2000), and an empty attestation store.
type world struct {
	contracts    *contract.Memory
	attestations *Memory
	v            *Verifier
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{contracts: &contract.Memory{}, attestations: &Memory{}}
	for _, c := range []*contract.TaskContract{
		makeContract(t, rootKey, rootContractID, 5000),
		makeContract(t, aliceKey, childContractID, 2000),
	} {
		if err := w.contracts.Put(c); err != nil {
			t.Fatal(err)
		}
	}
	w.v = &Verifier{
		Contracts:    w.contracts,
		Attestations: w.attestations,
		Now:          func() time.Time { return t1.Add(time.Hour) },
	}
	return w
}

func (w *world) put(t testing.TB, as ...*Attestation) {
	t.Helper()
	for _, a := range as {
		if err := w.attestations.Put(a); err != nil {
			t.Fatal(err)
		}
	}
}

// rawStore is a Store (and a contract.Store) that checks nothing, for
// putting what a real store would refuse in front of a verifier.
type rawStore[T any] struct {
	m   map[string]T
	err error // returned by Get when set
}

func (s *rawStore[T]) Put(v T) error { return fmt.Errorf("read-only") }
func (s *rawStore[T]) Get(id string) (T, error) {
	var zero T
	if s.err != nil {
		return zero, s.err
	}
	v, ok := s.m[id]
	if !ok {
		return zero, fmt.Errorf("%s: %w", id, fs.ErrNotExist)
	}
	return v, nil
}
func (s *rawStore[T]) List() ([]string, error) { return nil, nil }

func idN(prefix string, n int) string { return fmt.Sprintf("%s%012x", prefix, n) }
