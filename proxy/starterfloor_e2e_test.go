//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/reputation"
)

// With the starter floor in the policy's trust gate, the proxy refuses to
// delegate to a new agent (insufficient_reputation) until three trusted
// attesters have attested it; an untrusted attester does not count.
func TestStarterFloorThroughProxy(t *testing.T) {
	e := mcptest.NewEnv(t)
	r := &delegationRun{t: t, e: e, b: mcptest.NewKey(t, "b"), ws: filepath.Join(e.Dir, "workspace")}
	if err := os.MkdirAll(r.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	trusted := []*identity.Keypair{mcptest.NewKey(t, "t1"), mcptest.NewKey(t, "t2"), mcptest.NewKey(t, "t3")}
	stranger := mcptest.NewKey(t, "stranger")
	r.aTok = e.Mint(func(p *dct.CreateParams) { p.ContractID = "ct_aaaaaaaaaaaa" }, "docs:read:/project/**")
	var err error
	r.bTok, err = dct.Attenuate(r.aTok, dct.AttenuateParams{Attenuator: e.Agent, Delegatee: r.b.ID(), DelegationID: mcptest.NewDelegationID(),
		ContractID: "ct_bbbbbbbbbbbb", Capabilities: &[]dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/**"}}})
	if err != nil {
		t.Fatal(err)
	}
	r.bContract, err = contract.Create(e.Agent, contract.CreateParams{ID: "ct_bbbbbbbbbbbb", Title: "Summarize the sub-project notes",
		OutputSchema:        json.RawMessage(`{"type":"object"}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":1}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pol := e.Policy()
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\nreputation:\n  trust_gate:\n    min_reliability: 0.5\n    starter_floor:\n      trusted_attesters: [" +
		trusted[0].ID() + ", " + trusted[1].DID() + ", " + trusted[2].ID() + "]\n"
	r.p = e.StartProxy(mcptest.ProxyOptions{Policy: pol})
	r.s = r.p.Connect(mcptest.SessionOptions{})
	delA := r.aTok.Unverified().Authority.DelegationID

	attest := func(k *identity.Keypair) {
		t.Helper()
		a := reputation.Attestation{ToDID: r.b.DID(), Outcome: reputation.OutcomePositive, Weight: 1, Context: "task_completion"}
		if err := reputation.SignAttestation(&a, k); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(e.Dir, k.Name()+".json")
		mcptest.WriteFile(t, file, string(mcptest.MustJSON(a)))
		r.cli("reputation", "attest", "--import", file, "--workspace", r.ws)
	}
	attest(trusted[0])
	attest(trusted[1])
	attest(stranger)
	if res := r.delegate(r.bContract, r.bTok, delA); res.Accepted || res.Reason != gate.RejectUntrusted {
		t.Fatalf("two trusted attesters and a stranger: %+v", res)
	}
	attest(trusted[2])
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("three trusted attesters: %+v", res)
	}
}
