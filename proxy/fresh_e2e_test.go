//go:build unix

package proxy_test

// Revocations and endings are in force at the very next decision, through
// the real binary: after `delegateos revoke` returns, whatever the size of
// the list; in every proxy that shares a workspace; and for every token
// that contains a revoked block, whatever the entry's scope.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

// bigListEntries is the size of the large revocation list: a verifier with
// this many entries takes long enough to re-read its list that a re-read
// in the background lets calls through after a revocation.
const bigListEntries = 100_000

// bigList is built once per test binary: the list's bytes, and the
// delegateos binary that reads it. Signing and verifying 100,000 entries
// takes seconds, and a hundred times as long under the race detector, so
// the list is signed by internal/cmd/revlist and read by a delegateos
// built without the race detector (the other end-to-end tests run the
// race-enabled one).
var bigList struct {
	once sync.Once
	data []byte
	bin  string
	err  error
}

func bigRevocationList(t *testing.T) (data []byte, bin string) {
	t.Helper()
	bigList.once.Do(func() {
		dir, err := os.MkdirTemp("", "delegateos-biglist-")
		if err != nil {
			bigList.err = err
			return
		}
		defer os.RemoveAll(dir)
		revlist := mcptest.Build(t, "./internal/cmd/revlist", false)
		list := filepath.Join(dir, "list.json")
		if out, err := exec.Command(revlist, "-n", strconv.Itoa(bigListEntries), "-o", list).CombinedOutput(); err != nil {
			bigList.err = fmt.Errorf("revlist: %v\n%s", err, out)
			return
		}
		if bigList.data, bigList.err = os.ReadFile(list); bigList.err != nil {
			return
		}
		// Under the race detector, reading 100,000 entries takes minutes.
		bigList.bin = mcptest.Build(t, "./cmd/delegateos", false)
	})
	if bigList.err != nil {
		t.Fatal(bigList.err)
	}
	return bigList.data, bigList.bin
}

// outcome is one call of a burst: when it was sent and how it ended.
type outcome struct {
	sent    time.Time
	allowed bool
}

// allowed reports whether a call was allowed; one neither allowed nor
// refused as revoked fails the test.
func allowed(t *testing.T, r mcptest.Result) bool {
	t.Helper()
	switch {
	case r.Err == nil && !r.Res.IsError:
		return true
	case isDenial(r, dct.Revoked):
		return false
	}
	t.Errorf("a call ended neither allowed nor revoked: %v %+v", r.Err, r.RPC)
	return false
}

// A burst of calls runs while `delegateos revoke` appends to a list of
// 100,000 entries. Every call sent after the command returned is refused
// as revoked, the very first included.
func TestFreshRevokeInForceAtNextCall(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	revs := filepath.Join(e.Dir, "revocations.json")
	start := time.Now()
	data, bin := bigRevocationList(t)
	if err := os.WriteFile(revs, data, 0o644); err != nil {
		t.Fatal(err)
	}
	pol := e.Policy()
	pol.RevocationList = revs
	tok := e.Mint(nil, "docs:read:/project/**")
	s := e.StartProxy(mcptest.ProxyOptions{Bin: bin, Policy: pol, Token: tok}).Connect(mcptest.SessionOptions{})
	t.Logf("list of %d entries made and the proxy started in %v", bigListEntries, time.Since(start))
	for i := range 20 {
		s.Call(t, "read_file", notesPath).OK(t, fmt.Sprintf("call %d before the revocation", i))
	}

	stop := make(chan struct{})
	var (
		mu       sync.Mutex
		outcomes []outcome
		burst    sync.WaitGroup
	)
	stopBurst := sync.OnceFunc(func() {
		close(stop)
		burst.Wait()
	})
	defer stopBurst()
	for range 2 {
		burst.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				was := allowed(t, s.Call(t, "read_file", notesPath))
				mu.Lock()
				outcomes = append(outcomes, outcome{sent, was})
				mu.Unlock()
			}
		})
	}
	tokFile := filepath.Join(e.Dir, "session.tok")
	mcptest.WriteFile(t, tokFile, tok.String())
	revoke := exec.Command(bin, "revoke", "--key", e.KeyFile(e.Root), "--token", "@"+tokFile, "--block", "0", "--list", revs)
	var out bytes.Buffer
	revoke.Stdout, revoke.Stderr = &out, &out
	revoking := time.Now()
	err := revoke.Run()
	returned := time.Now()
	t.Logf("delegateos revoke took %v", returned.Sub(revoking))
	if err != nil {
		t.Fatalf("delegateos revoke: %v\n%s", err, out.String())
	}
	// The very first call after the command returned, then more.
	checkDenial(t, s.Call(t, "read_file", notesPath), denial{typ: dct.Revoked, detail: tok.RevocationIDs()[0], requested: docsRead("/project/sub/notes.md")})
	for i := range 50 {
		if allowed(t, s.Call(t, "read_file", notesPath)) {
			t.Fatalf("call %d after delegateos revoke returned was allowed", i+2)
		}
	}
	stopBurst()
	var before, after, allowedAfter int
	for _, o := range outcomes {
		if !o.sent.After(returned) {
			before++
			continue
		}
		after++
		if o.allowed {
			allowedAfter++
		}
	}
	if allowedAfter > 0 {
		t.Errorf("%d of the %d burst calls sent after delegateos revoke returned were allowed", allowedAfter, after)
	}
	t.Logf("burst: %d calls sent while the revocation was written, %d after it returned", before, after)
}

// secondProxy starts another proxy on r's workspace, with the revocation
// list revs, and connects a client to it.
func (r *delegationRun) secondProxy(revs string) (*mcptest.Process, *mcptest.Session) {
	pol := r.e.Policy(mcptest.Rule{Match: "read_file", Namespace: "docs", Action: "read", Arg: "/path", Cost: 100})
	pol.Rules = pol.Rules[1:]
	pol.RevocationList = revs
	pol.Extra = "workspace: " + strconv.Quote(r.ws) + "\n"
	p := r.e.StartProxy(mcptest.ProxyOptions{Policy: pol})
	return p, p.Connect(mcptest.SessionOptions{})
}

// Two proxies share a workspace. A delegation that ends through the first
// no longer authorizes calls through the second, at its next call.
func TestFreshEndingSeenBySecondProxy(t *testing.T) {
	t.Parallel()
	subPath := map[string]any{"path": "/project/sub/notes.md"}
	for _, how := range []string{"completed", "revoked by message"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			r := newDelegationRun(t)
			delA := r.aTok.Unverified().Authority.DelegationID
			delB := r.bTok.Unverified().Attenuations[0].DelegationID
			// The second proxy reads a list of its own, so only the chain
			// can tell it.
			ownList := filepath.Join(r.e.Dir, "second-revocations.json")
			mcptest.WriteFile(t, ownList, "[]\n")
			_, second := r.secondProxy(ownList)
			if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
				t.Fatalf("delegate: %+v", res)
			}
			second.CallAs(t, r.bTok.String(), "read_file", subPath).OK(t, "B's token through the second proxy")
			want := "has ended (completed)"
			if how == "completed" {
				if done := r.complete(delB, `{"summary":"Three milestones, the second one late."}`, 100); done.Status != "completed" {
					t.Fatalf("complete: %+v", done)
				}
			} else {
				want = "has ended (revoked)"
				entry, err := revocation.NewEntry(r.e.Agent, r.bTok.RevocationIDs()[1], revocation.ScopeChain, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				eb, _ := json.Marshal(entry)
				if rv := decodeResult[gate.RevokeResult](t, r.request(gate.MethodRevoke, gate.RevokeParams{Revocation: eb})); len(rv.Delegations) != 1 {
					t.Fatalf("revoke: %+v", rv)
				}
			}
			checkDenial(t, second.CallAs(t, r.bTok.String(), "read_file", subPath),
				denial{typ: dct.Expired, detail: want, requested: docsRead("/project/sub/notes.md"), granted: mcptest.Caps(t, "docs:read:/project/sub/**")})
			// The delegator's own delegation is still active.
			second.CallAs(t, r.aTok.String(), "read_file", subPath).OK(t, "A's token through the second proxy")
		})
	}
}

// Two proxies share a workspace and a revocation list: a revocation
// written with the CLI is in force in both at their next call.
func TestFreshCLIRevokeSeenByEveryProxy(t *testing.T) {
	t.Parallel()
	r := newDelegationRun(t)
	delA := r.aTok.Unverified().Authority.DelegationID
	_, second := r.secondProxy(r.revs)
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	subPath := map[string]any{"path": "/project/sub/notes.md"}
	sessions := map[string]*mcptest.Session{"first": r.s, "second": second}
	for name, s := range sessions {
		s.CallAs(t, r.bTok.String(), "read_file", subPath).OK(t, "before the revocation, "+name)
	}
	tokFile := filepath.Join(r.e.Dir, "b.tok")
	mcptest.WriteFile(t, tokFile, r.bTok.String()+"\n")
	r.cli("revoke", "--key", r.e.KeyFile(r.e.Agent), "--token", "@"+tokFile, "--block", "1", "--list", r.revs)
	for name, s := range sessions {
		got := s.CallAs(t, r.bTok.String(), "read_file", subPath)
		if !isDenial(got, dct.Revoked) {
			t.Errorf("%s proxy: the first call after delegateos revoke returned: %v %+v", name, got.Err, got.RPC)
		}
	}
}

// A token with two attenuations whose middle block is revoked with scope
// block is refused (DelegateOS §10.1 step 2: a revoked ID matching any
// block revokes the token), and so is the token that ends with that block;
// the token above it is not.
func TestFreshBlockScopeRevokesDescendants(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	revs := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, revs, "[]\n")
	pol := e.Policy()
	pol.RevocationList = revs
	bob, carol := mcptest.NewKey(t, "bob"), mcptest.NewKey(t, "carol")
	agentTok := e.Mint(nil, "docs:read:/project/**")
	bobTok := mcptest.Attenuate(t, agentTok, e.Agent, bob, 500_000, "docs:read:/project/sub/**")
	carolTok := mcptest.Attenuate(t, bobTok, bob, carol, 100_000)
	s := e.StartProxy(mcptest.ProxyOptions{Policy: pol}).Connect(mcptest.SessionOptions{})
	for _, tok := range []*dct.Token{agentTok, bobTok, carolTok} {
		s.CallAs(t, tok.String(), "read_file", notesPath).OK(t, "before the revocation")
	}
	tokFile := filepath.Join(e.Dir, "bob.tok")
	mcptest.WriteFile(t, tokFile, bobTok.String())
	if out, errOut, code := mcptest.CLI(t, "revoke", "--key", e.KeyFile(e.Agent), "--token", "@"+tokFile, "--block", "1", "--scope", "block", "--list", revs); code != 0 {
		t.Fatalf("delegateos revoke: status %d\n%s%s", code, out, errOut)
	}
	middle := carolTok.RevocationIDs()[1]
	for name, tok := range map[string]*dct.Token{"carol's, whose middle block is revoked": carolTok, "bob's, whose last block is revoked": bobTok} {
		t.Run(name, func(t *testing.T) {
			checkDenial(t, s.CallAs(t, tok.String(), "read_file", notesPath),
				denial{typ: dct.Revoked, detail: middle, requested: docsRead("/project/sub/notes.md")})
		})
	}
	s.CallAs(t, agentTok.String(), "read_file", notesPath).OK(t, "the agent's token, which lacks the revoked block")
}
