//go:build unix

package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// selfContract is a contract issued by k under id, whose output needs a
// summary of 20 characters or more; depth is how often it may be
// delegated further.
func selfContract(t *testing.T, k *identity.Keypair, id string, depth int64) *contract.TaskContract {
	t.Helper()
	c, err := contract.Create(k, contract.CreateParams{ID: id, Title: "Summarize the notes",
		OutputSchema:        json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":20}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), MaxChainDepth: depth, RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// attenuateFor narrows tok, held by from, to to under contract ct.
func attenuateFor(t *testing.T, tok *dct.Token, from, to *identity.Keypair, ct string) *dct.Token {
	t.Helper()
	out, err := dct.Attenuate(tok, dct.AttenuateParams{Attenuator: from, Delegatee: to.ID(), DelegationID: mcptest.NewDelegationID(), ContractID: ct})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func lastDelegation(tok *dct.Token) string {
	st := tok.Unverified()
	return st.Attenuations[len(st.Attenuations)-1].DelegationID
}

// completeAs completes delegation del under c with an attestation signed
// by k whose output passes c's verification.
func (r *delegationRun) completeAs(k *identity.Keypair, c *contract.TaskContract, del string) gate.CompleteResult {
	t := r.t
	t.Helper()
	a, err := attest.Create(k, attest.CreateParams{ContractID: c.ID, DelegationID: del, Success: true,
		Output: json.RawMessage(`{"summary":"Three milestones, the second one late."}`), DurationMs: 10}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(a)
	return decodeResult[gate.CompleteResult](t, r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: del, Attestation: ab}))
}

// noSignals checks, with the CLI, that the workspace has no reputation
// signal about k.
func (r *delegationRun) noSignals(k *identity.Keypair) {
	t := r.t
	t.Helper()
	out := r.cli("reputation", "show", "--workspace", r.ws, "--", k.DID())
	if !strings.Contains(out, k.DID()+" is unknown: this workspace has no signals about it") {
		t.Errorf("reputation show %s:\n%s", k.Name(), out)
	}
}

// An agent that delegates work to itself, directly or back through
// another principal, completes it (the chain records that) but earns no
// reputation from it, and the reply says why. Through the real binary.
func TestSelfDealingEarnsNoReputation(t *testing.T) {
	t.Run("A→A", func(t *testing.T) {
		r := newDelegationRun(t)
		a := r.e.Agent
		delA := r.aTok.Unverified().Authority.DelegationID
		c := selfContract(t, a, "ct_5e1f5e1f5e1f", 0)
		tok := attenuateFor(t, r.aTok, a, a, c.ID)
		if res := r.delegate(c, tok, delA); !res.Accepted {
			t.Fatalf("delegate: %+v", res)
		}
		del := lastDelegation(tok)
		done := r.completeAs(a, c, del)
		if done.Status != "completed" || !done.Verified {
			t.Fatalf("complete: %+v", done)
		}
		problems := strings.Join(done.Problems, "\n")
		if !strings.Contains(problems, "no reputation signal recorded: the delegate "+a.DID()+" is also the delegator (self-dealing)") {
			t.Errorf("problems: %s", problems)
		}
		if st := r.chainStatus(del); st != "completed" {
			t.Errorf("chain show: %s is %q", del, st)
		}
		r.noSignals(a)
		r.p.WaitLog("no reputation signal: self-dealing", nil)
	})
	t.Run("A→B→A", func(t *testing.T) {
		r := newDelegationRun(t)
		a, b := r.e.Agent, r.b
		delA := r.aTok.Unverified().Authority.DelegationID
		cB := selfContract(t, a, "ct_b0b0b0b0b0b0", 1)
		tokB := attenuateFor(t, r.aTok, a, b, cB.ID)
		if res := r.delegate(cB, tokB, delA); !res.Accepted {
			t.Fatalf("delegate to B: %+v", res)
		}
		cA := selfContract(t, b, "ct_baba0000baba", 0)
		tokA := attenuateFor(t, tokB, b, a, cA.ID)
		if res := r.delegate(cA, tokA, lastDelegation(tokB)); !res.Accepted {
			t.Fatalf("delegate back to A: %+v", res)
		}
		done := r.completeAs(a, cA, lastDelegation(tokA))
		if done.Status != "completed" || !done.Verified {
			t.Fatalf("complete: %+v", done)
		}
		problems := strings.Join(done.Problems, "\n")
		if !strings.Contains(problems, "the delegate "+a.DID()+" is also a delegator earlier in the delegation chain (self-dealing)") {
			t.Errorf("problems: %s", problems)
		}
		r.noSignals(a)
		// B's own work for A still counts: A rates B.
		doneB := r.completeAs(b, cB, lastDelegation(tokB))
		if doneB.Status != "completed" || len(doneB.Problems) != 0 {
			t.Fatalf("B's completion: %+v", doneB)
		}
		if out := r.cli("reputation", "show", "--workspace", r.ws, "--", b.ID()); !strings.Contains(out, "reliability") {
			t.Errorf("B's profile:\n%s", out)
		}
	})
}
