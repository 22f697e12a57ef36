//go:build unix

package proxy_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// A delegation whose token is revoked with delegateos revoke (the list
// only; the chain log still says active) can still be completed:
// delegateos/complete checks the chain record's status but never the
// delegation's token against the revocation list, so the revoked delegate
// gets its delegation recorded completed and earns reputation for it.
// Found by the second red team (was TestRedteam2RevokedDelegationStillCompletes).
func TestE2EDelegationCompleteRefusesRevokedToken(t *testing.T) {
	r := newDelegationRun(t)
	delA := r.aTok.Unverified().Authority.DelegationID
	delB := r.bTok.Unverified().Attenuations[0].DelegationID
	if res := r.delegate(r.bContract, r.bTok, delA); !res.Accepted {
		t.Fatalf("delegate: %+v", res)
	}
	tokFile := filepath.Join(r.e.Dir, "b.tok")
	mcptest.WriteFile(t, tokFile, r.bTok.String()+"\n")
	r.cli("revoke", "--key", r.e.KeyFile(r.e.Agent), "--token", "@"+tokFile, "--block", "1", "--list", r.revs)
	if got := r.s.Call(t, "read_file", map[string]any{"path": "/project/sub/notes.md"}); got.RPC == nil || !strings.Contains(mcptest.MustJSON(got.RPC.Data), "revoked") {
		t.Fatalf("a call under the revoked token: %+v", got)
	}
	a, err := attest.Create(r.b, attest.CreateParams{ContractID: r.bContract.ID, DelegationID: delB, Success: true,
		Output: json.RawMessage(`{"summary":"Three milestones, the second one late."}`), CostMicrocents: 100, DurationMs: 1200}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(a)
	resp := r.request(gate.MethodComplete, gate.CompleteParams{DelegationID: delB, Attestation: ab})
	if resp.Error == nil {
		var res gate.CompleteResult
		_ = json.Unmarshal(resp.Result, &res)
		if res.Status == "completed" {
			t.Errorf("delegateos/complete recorded the revoked delegation %s completed: %s", delB, resp.Result)
		}
	}
	out := r.cli("reputation", "show", "--workspace", r.ws, "--json", "--", r.b.ID())
	if strings.Contains(out, `"sampleSize": 1`) || strings.Contains(out, `"sampleSize":1`) {
		t.Errorf("B earned reputation for work under a revoked token:\n%s", out)
	}
}
