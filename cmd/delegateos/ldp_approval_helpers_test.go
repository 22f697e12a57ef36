package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// peerApprovalServe runs serve as ldp:delegate:docs whose echo (cost 100)
// a rule holds for approval (approval is the rule's YAML), answered by
// approver; extra is appended to the policy.
func peerApprovalServe(t *testing.T, env *mcptest.Env, approver *identity.Keypair, approval, extra string, flags ...string) *mcptest.Server {
	t.Helper()
	rule := mcptest.Priced("echo", 100)
	rule.Approval = approval
	pol := env.Policy(rule)
	pol.Extra = strings.Replace(peerSection, "  skills:", "  approvers: ["+approver.DID()+"]\n  skills:", 1) + extra
	return env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: append([]string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}, flags...)})
}

// peerHeld posts envelope bytes in the background, to be held for
// approval; the reply (nil when the request ended without one) comes on
// the channel. The request is cancelled when the test ends.
func peerHeld(t *testing.T, srv *mcptest.Server, body []byte) <-chan *ldp.Envelope {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make(chan *ldp.Envelope, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.Base+ldp.MessagesPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- nil
			return
		}
		defer res.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(res.Body)
		e, _ := ldp.ParseEnvelope(b.Bytes())
		out <- e
	}()
	return out
}

// peerAwaiting waits until the server's log has n tasks awaiting approval
// and returns their approval IDs by task ID.
func peerAwaiting(t *testing.T, srv *mcptest.Server, n int) map[string]string {
	t.Helper()
	ids := map[string]string{}
	mcptest.Eventually(t, "tasks awaiting approval", func() bool {
		for _, l := range srv.LogWith("LDP task awaits approval", func(map[string]any) bool { return true }) {
			ids[l["task"].(string)] = l["approval_id"].(string)
		}
		return len(ids) >= n
	})
	return ids
}

// peerTask is a signed TASK_SUBMIT of echo in session sid by key.
func peerTask(t *testing.T, sid, from, taskID, input string, key *identity.Keypair) []byte {
	t.Helper()
	raw, _ := json.Marshal(input)
	return peerSign(t, peerEnvelope(sid, from, &ldp.TaskSubmit{TaskID: taskID, Skill: "echo", Input: raw}, ldp.ModeText), key.PrivateKey())
}

// peerPolicyPath is the policy file serve was started with.
func peerPolicyPath(srv *mcptest.Server) string {
	for i, a := range srv.Cmd.Args {
		if a == "--policy" {
			return srv.Cmd.Args[i+1]
		}
	}
	return ""
}

// peerSubmitAsync submits a task in s in the background; its reply comes
// on the channel.
func peerSubmitAsync(t *testing.T, s *ldp.ClientSession, b *ldp.TaskSubmit) <-chan *ldp.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	out := make(chan *ldp.Envelope, 1)
	go func() {
		reply, err := s.Submit(ctx, b, ldp.ModeText, nil, nil)
		if err != nil {
			t.Log(err)
		}
		out <- reply
	}()
	return out
}

// peerApprove answers approval id as key's holder; it returns the CLI's
// exit code and output.
func peerApprove(t *testing.T, env *mcptest.Env, srv *mcptest.Server, key *identity.Keypair, id string, extra ...string) (int, string) {
	t.Helper()
	out, errs, code := mcptest.CLI(t, append(append([]string{"ldp", "approve", "--key", env.KeyFile(key)}, extra...), srv.Base, id)...)
	return code, out + errs
}
