package gate

// Adversarial tests of the delegation messages. Each test asserts
// the property the proxy should hold; a failure demonstrates a hole.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/revocation"
	"github.com/delegateos/delegateos/verify"
)

func delegationContract(t *testing.T, k *identity.Keypair, id string, now time.Time, verification string) *contract.TaskContract {
	t.Helper()
	c, err := contract.Create(k, contract.CreateParams{
		ID: id, Title: "t", Description: "d",
		OutputSchema: json.RawMessage(`{}`), Verification: json.RawMessage(verification),
		MaxBudgetMicrocents: 10000, Deadline: now.Add(time.Hour), MaxChainDepth: 1,
		RequiredCapabilities: []string{"docs:read"},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A (the root's delegatee, the client) attenuates its own token to a
// sybil key, naming the SAME contract ID as its own delegation (dct's
// default), and delegates it with a contract A signs under that ID. The
// proxy stores A's contract as "ct_aaaaaaaaaaaa" and records del_aaaa as
// an ancestor. A then completes its OWN delegation del_aaaa: the work is
// verified against A's self-signed contract, not the root's, and the
// delegation is recorded completed (a good reputation signal from the root).
// Found by a review (was TestReviewContractSwapSelfCompletion).
func TestDelegationContractSwapCannotSelfComplete(t *testing.T) {
	f := newDelegationFixture(t)
	sybil := fixtureKey(t, 7, "sybil")
	tok, err := dct.Attenuate(f.aTok, dct.AttenuateParams{Attenuator: f.a, Delegatee: sybil.ID(),
		DelegationID: "del_eeeeeeeeeeee", ContractID: "ct_aaaaaaaaaaaa", Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	// A's own contract under the root's contract ID: anything passes.
	fake := delegationContract(t, f.a, "ct_aaaaaaaaaaaa", f.now,
		`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":0}}`)
	res, _, err := f.d.Delegate(f.params(fake, tok, "del_eeeeeeeeeeee", "del_aaaaaaaaaaaa"))
	if err != nil || res.Accepted || res.Reason != RejectContractMismatch {
		t.Fatalf("a delegation reusing its parent's contract ID was not refused: %+v %v", res, err)
	}
	if _, err := f.d.Contracts.Get("ct_aaaaaaaaaaaa"); err == nil {
		t.Fatal("the refused contract was stored")
	}
	// The root's genuine contract for del_aaaa is still accepted.
	if r, _, _ := f.d.Delegate(f.params(f.aContract, f.aTok, "del_aaaaaaaaaaaa", dct.RootParentDelegationID)); !r.Accepted {
		t.Errorf("the root's genuine contract for del_aaaa is refused: %s %s", r.Reason, r.Details)
	}
}

// A contract stored under a delegation's contract ID but issued by
// someone other than its delegator (another chain's contract with the same
// ID) never judges that delegation's work.
// Found by a review (was TestReviewCompleteNeedsTheDelegatorsContract).
func TestDelegationCompleteNeedsTheDelegatorsContract(t *testing.T) {
	f := newDelegationFixture(t)
	f.delegateB() // records del_aaaa (root → A) as B's ancestor
	foreign := delegationContract(t, f.mallory, "ct_aaaaaaaaaaaa", f.now,
		`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":0}}`)
	if err := f.d.Contracts.Put(foreign); err != nil {
		t.Fatal(err)
	}
	_, err := f.d.Complete(context.Background(), f.attestation(f.a, "del_aaaaaaaaaaaa", "ct_aaaaaaaaaaaa", `{"summary":"x"}`, 0))
	if err == nil || !strings.Contains(err.Error(), "was not issued by") {
		t.Fatalf("completed against a contract its delegator did not issue: %v", err)
	}
	if del, _ := f.d.Chain.Get("del_aaaaaaaaaaaa"); del.Status != chain.StatusActive {
		t.Errorf("del_aaaa is %s", del.Status)
	}
	// Nor can an ancestor recorded only as part of a chain be completed
	// before its own contract was delegated.
	f2 := newDelegationFixture(t)
	f2.delegateB()
	if _, err := f2.d.Complete(context.Background(), f2.attestation(f2.a, "del_aaaaaaaaaaaa", "ct_aaaaaaaaaaaa", `{"summary":"a long enough summary"}`, 0)); err == nil || !strings.Contains(err.Error(), "no contract was delegated") {
		t.Errorf("completed an ancestor without its contract: %v", err)
	}
}

// Any principal can append validly self-signed entries to the
// revocation list through delegateos/revoke, with no authority over any
// token: the list (and every verifier reading it) grows without bound,
// and past revocation.MaxListSize every token is denied (fail closed).
// Found by a review (was TestReviewRevokeByStrangerGrowsList).
func TestDelegationRevokeByStrangerRefused(t *testing.T) {
	f := newDelegationFixture(t)
	const n = 100
	start := time.Now()
	for i := 0; i < n; i++ {
		stranger, err := identity.Generate(rand.Reader, "x")
		if err != nil {
			t.Fatal(err)
		}
		var id [32]byte
		rand.Read(id[:])
		e, err := revocation.NewEntry(stranger, b64(id[:]), revocation.ScopeChain, f.now)
		if err != nil {
			t.Fatal(err)
		}
		eb, _ := json.Marshal(e)
		p, _ := json.Marshal(RevokeParams{Revocation: eb})
		if _, err := f.d.Revoke(p); err == nil {
			t.Fatalf("a stranger's revocation %d was accepted", i)
		}
	}
	el := time.Since(start)
	fi, _ := os.Stat(f.revList)
	l, _ := revocation.Load(f.revList)
	if l == nil || l.Len() > 0 {
		t.Errorf("HOLE: %d revocations by principals that signed no known token were stored (%d bytes, %v total; each append re-verifies the whole list)", l.Len(), fi.Size(), el)
	}
}

// A "block" revocation of A's block and the chain must agree on B's
// delegation: the verifier refuses B's token (any scope revokes every
// token containing the block) and Revoke records B's delegation revoked
// along with A's.
// Found by a review (was TestReviewBlockRevokeChainMismatch).
func TestDelegationBlockRevokeRecordsEveryDelegation(t *testing.T) {
	f := newDelegationFixture(t)
	f.delegateB()
	e, err := revocation.NewEntry(f.root, f.aTok.RevocationIDs()[0], revocation.ScopeBlock, f.now)
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := json.Marshal(e)
	p, _ := json.Marshal(RevokeParams{Revocation: eb})
	if _, err := f.d.Revoke(p); err != nil {
		t.Fatal(err)
	}
	_, verr := f.d.Verifier.VerifyChain(f.bTok.String(), f.now)
	del, _ := f.d.Chain.Get("del_bbbbbbbbbbbb")
	if verr == nil && del.Status == chain.StatusRevoked {
		t.Errorf("HOLE: chain records del_bbbb revoked, but the verifier still accepts B's token")
	}
}

// Concurrent delegateos/complete of one active delegation each run
// the full verification (judge included); only one can be recorded.
// Found by a review (was TestReviewConcurrentCompletesEachRunJudge).
func TestDelegationConcurrentCompletesJudgedOnce(t *testing.T) {
	f := newDelegationFixture(t)
	var calls, running, peak atomic.Int64
	judge := verify.JudgeFunc(func(ctx context.Context, req verify.JudgeRequest) (verify.JudgeResponse, error) {
		calls.Add(1)
		r := running.Add(1)
		for {
			p := peak.Load()
			if r <= p || peak.CompareAndSwap(p, r) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		running.Add(-1)
		return verify.JudgeResponse{Score: 1, Reasoning: "ok"}, nil
	})
	f.d.Attest.Output = &verify.Verifier{Judge: judge}
	c := delegationContract(t, f.a, "ct_bbbbbbbbbbbb", f.now,
		`{"method":"llm_judge","judgePrompt":"Rate {output} for {contract}","passThreshold":0.5,"evaluations":1}`)
	if res, _, err := f.d.Delegate(f.params(c, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa")); err != nil || !res.Accepted {
		t.Fatalf("delegate: %+v %v", res, err)
	}
	var outcomes atomic.Int64
	f.d.OnOutcome = func(Outcome) error { outcomes.Add(1); return nil }
	// As the relay hands them over (proxy: delegationMessage), one
	// goroutine each, unbounded.
	const n = 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		p := f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", fmt.Sprintf(`{"summary":"attempt %d"}`, i), 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.d.Complete(context.Background(), p)
		}()
	}
	wg.Wait()
	if calls.Load() > 1 {
		t.Errorf("HOLE: %d judge runs (peak %d concurrent) for one delegation; %d outcome(s) recorded", calls.Load(), peak.Load(), outcomes.Load())
	}
}

// An output the verifier refuses to judge (here: a character outside
// the BMP with a regex without the u flag) is "unverified": the
// attestation is stored, the delegation stays active, and the delegatee
// may repeat without bound, storing a new attestation each time.
// Found by a review (was TestReviewUnverifiedStoresUnboundedAttestations).
func TestDelegationUnverifiedAttestationsBounded(t *testing.T) {
	f := newDelegationFixture(t)
	c := delegationContract(t, f.a, "ct_bbbbbbbbbbbb", f.now,
		`{"method":"deterministic_check","checkName":"regex_match","checkParams":{"field":"summary","pattern":"^a"}}`)
	if res, _, err := f.d.Delegate(f.params(c, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa")); err != nil || !res.Accepted {
		t.Fatalf("delegate: %+v %v", res, err)
	}
	mem := f.d.Attestations.(*attest.Memory)
	var ids []string
	for i := 0; i < 20; i++ {
		p := f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", fmt.Sprintf(`{"summary":"\ud83d\ude00 %d"}`, i), 0)
		var cp CompleteParams
		_ = json.Unmarshal(p, &cp)
		var a struct{ ID string }
		_ = json.Unmarshal(cp.Attestation, &a)
		ids = append(ids, a.ID)
		if _, err := f.d.Complete(context.Background(), p); err == nil {
			t.Fatalf("attempt %d was decided", i)
		} else if i == 0 {
			t.Logf("reply: %v", err)
		}
	}
	var stored int
	for _, id := range ids {
		if _, err := mem.Get(id); err == nil {
			stored++
		}
	}
	del, _ := f.d.Chain.Get("del_bbbbbbbbbbbb")
	if stored > 1 && del.Status == chain.StatusActive {
		t.Errorf("HOLE: %d undecided attestations stored for one delegation, which is still active", stored)
	}
}

// A failing judge command's stderr is quoted to the client in the
// JSON-RPC error of delegateos/complete.
// Found by a review (was TestReviewJudgeStderrReachesClient).
func TestDelegationJudgeStderrKeptFromClient(t *testing.T) {
	f := newDelegationFixture(t)
	f.d.Attest.Output = &verify.Verifier{Judge: &verify.CommandJudge{
		Command: []string{"sh", "-c", `echo "upstream 401: key sk-live-SECRET123 rejected" >&2; exit 1`}, Timeout: 5 * time.Second}}
	c := delegationContract(t, f.a, "ct_bbbbbbbbbbbb", f.now,
		`{"method":"llm_judge","judgePrompt":"Rate {output} for {contract}","passThreshold":0.5,"evaluations":1}`)
	if res, _, err := f.d.Delegate(f.params(c, f.bTok, "del_bbbbbbbbbbbb", "del_aaaaaaaaaaaa")); err != nil || !res.Accepted {
		t.Fatalf("delegate: %+v %v", res, err)
	}
	_, err := f.d.Complete(context.Background(), f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", `{"summary":"hello"}`, 0))
	if err != nil && strings.Contains(err.Error(), "sk-live-SECRET123") {
		t.Errorf("HOLE: the judge's stderr is in the reply to the client: %v", err)
	}
}

// The chain's ended status and the trust gate are not enforced on
// calls: after del_bbbb is recorded completed, B's token (named in
// params._delegateos) still passes the gate; likewise a delegatee that
// delegateos/delegate refused as untrusted.
// Found by a review (was TestReviewEndedDelegationTokenStillUsable).
func TestDelegationEndedTokenRefused(t *testing.T) {
	f := newDelegationFixture(t)
	f.delegateB()
	if _, err := f.d.Complete(context.Background(), f.attestation(f.b, "del_bbbbbbbbbbbb", "ct_bbbbbbbbbbbb", `{"summary":"a long enough summary"}`, 0)); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse([]byte("roots: ["+strconv.Quote(f.root.ID())+"]\ntools:\n  - match: read_file\n    namespace: docs\n    action: read\n    resource: {arg: /path}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Policy: pol, Verifier: f.d.Verifier, Budget: f.spend, Now: func() time.Time { return f.now }, Ended: f.d.Ended}
	d := g.Decide(CallRequest{Tool: "read_file", Arguments: json.RawMessage(`{"path":"/project/sub/x"}`), Token: f.bTok.String()})
	if del, _ := f.d.Chain.Get("del_bbbbbbbbbbbb"); del.Status == chain.StatusCompleted && d.Allowed {
		t.Errorf("HOLE (design): the gate allows a call under delegation %s, recorded %s", del.ID, del.Status)
	}
}

func b64(b []byte) string {
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var sb strings.Builder
	var acc, bits uint
	for _, c := range b {
		acc = acc<<8 | uint(c)
		bits += 8
		for bits >= 6 {
			bits -= 6
			sb.WriteByte(alpha[(acc>>bits)&63])
		}
	}
	if bits > 0 {
		sb.WriteByte(alpha[(acc<<(6-bits))&63])
	}
	return sb.String()
}

// The contract swap of TestDelegationContractSwapCannotSelfComplete would let a
// DOWNSTREAM delegatee sabotage its delegator: B (A's delegatee)
// attenuates its token to a sybil naming A's contract ID, signs an
// unsatisfiable contract under that ID and delegates it. A's honest
// completion of del_aaaa is then judged against B's
// contract and recorded failed (a bad signal for A from the root).
// Found by a review (was TestReviewContractSquatFailsDelegator).
func TestDelegationContractSquatCannotFailDelegator(t *testing.T) {
	f := newDelegationFixture(t)
	f.delegateB()
	sybil := fixtureKey(t, 8, "b-sybil")
	tok, err := dct.Attenuate(f.bTok, dct.AttenuateParams{Attenuator: f.b, Delegatee: sybil.ID(),
		DelegationID: "del_ffffffffffff", ContractID: "ct_aaaaaaaaaaaa", Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	trap := delegationContract(t, f.b, "ct_aaaaaaaaaaaa", f.now,
		`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","max":0}}`)
	if res, _, err := f.d.Delegate(f.params(trap, tok, "del_ffffffffffff", "del_bbbbbbbbbbbb")); err != nil || res.Accepted {
		t.Fatalf("B's squat of ct_aaaa was accepted: %+v %v", res, err)
	}
	if _, _, err := f.d.Delegate(f.params(f.aContract, f.aTok, "del_aaaaaaaaaaaa", dct.RootParentDelegationID)); err != nil {
		t.Fatal(err)
	}
	var outcome *Outcome
	f.d.OnOutcome = func(o Outcome) error { outcome = &o; return nil }
	// A's honest work, which meets the root's contract.
	res, err := f.d.Complete(context.Background(), f.attestation(f.a, "del_aaaaaaaaaaaa", "ct_aaaaaaaaaaaa", `{"summary":"a long enough summary"}`, 0))
	if err == nil && res.Status == string(chain.StatusFailed) && outcome != nil && outcome.Contract.Issuer == f.b.ID() {
		t.Errorf("HOLE: A's honest completion of del_aaaa was judged against B's contract and recorded failed: %v", res.Problems)
	}
}
