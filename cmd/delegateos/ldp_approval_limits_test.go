package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// Limits of the tasks an LDP delegate holds for approval (rtldp3's breaks,
// fixed): what a waiting task holds, and how many one delegation tree may
// hold.

// TestLDPApprovalWaitReleasesBodyBudget: an LDP envelope's body is read
// within the server's budget of bodies in flight, from the anonymous
// share (an eighth: 8 MiB by default), and given back only when the reply
// is written. A task held for approval keeps its body's share for as long
// as it waits (2 minutes by default, up to an hour). One token holder
// sends 16 tasks (the per-initiator cap) of 512 KiB each: the anonymous
// share is full, so every LDP envelope of every other peer, every
// anonymous MCP body, and the approvers' own answers at /ldp/approvals
// are refused 503 until the tasks end: nobody can approve or decline
// them (rtldp3 #6: the approver's 'ldp approve' and another peer's HELLO
// got 503). Now a task gives its share back before it waits, and
// approvals are read outside the budget.
func TestLDPApprovalWaitReleasesBodyBudget(t *testing.T) {
	env := mcptest.NewEnv(t)
	approver := mcptest.NewKey(t, "approver")
	srv := rt3ApprovalServe(t, env, approver, "required", "")
	s := rt3Open(t, srv, "ldp:delegate:hog", env.Agent, env.Mint(nil, "mcp:echo:*"))
	const size = 512 << 10
	for i := range 16 {
		id := fmt.Sprintf("hold-%02d", i)
		pad := size
		var body []byte
		for {
			body = rt3Task(t, s.ID, "ldp:delegate:hog", id, strings.Repeat("a", pad), env.Agent)
			if len(body) == size {
				break
			}
			pad += size - len(body)
		}
		rt3Held(t, srv, body)
	}
	ids := rt3Awaiting(t, srv, 16)
	var broke []string
	out, errs, code := mcptest.CLI(t, "ldp", "approve", "--key", env.KeyFile(approver), srv.Base, ids["hold-00"])
	if code != 0 {
		broke = append(broke, fmt.Sprintf("the approver's answer: exit %d %s%s", code, out, errs))
	}
	hello := rtSign(t, rtEnvelope("", "ldp:delegate:other", &ldp.Hello{DelegateID: "ldp:delegate:other", SupportedModes: []ldp.PayloadMode{ldp.ModeText}}, ldp.ModeText),
		mcptest.NewKey(t, "other").PrivateKey())
	if status, _, body := rtPost(t, srv, "", hello, ""); status != http.StatusOK {
		broke = append(broke, fmt.Sprintf("another peer's HELLO: HTTP %d %s", status, body))
	}
	if len(broke) > 0 {
		t.Fatalf("16 tasks of one holder waiting for approval hold the anonymous body share:\n%s", strings.Join(broke, "\n"))
	}
}
