package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPSignedTaskNumbersInJCSForm (rtldp3 #1): the Ed25519 profile signs
// the JCS form of an envelope, and JCS writes every number as the nearest
// double in its shortest form, so 9007199254740993 and 9007199254740992
// (and 1.0 and 1) have one JCS form and one signature verifies for both.
// A relay rewrote the number a holder signed and the tool got the relay's.
// Now an Ed25519 envelope must carry every number in its JCS form (what
// the signature covers), the signer refuses a number whose JCS form is
// another number, and ldp.Client sends the JCS form of what it signs.
func TestLDPSignedTaskNumbersInJCSForm(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, _ := peerServe(t, env, mcptest.NewKey(t, "server"), "")
	tok := env.Mint(nil, "mcp:echo:*")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, tok)
	submit := func(id, input string) *ldp.Envelope { return holderArgsTask(s, tok, id, input) }
	// The holder's signer will not sign a number its signature cannot
	// tell from another.
	err := ldp.SignEd25519(submit("lossy", `{"text":"pay","amount":9007199254740993}`), env.Agent.PrivateKey())
	if err == nil || !strings.Contains(err.Error(), "9007199254740993") {
		t.Fatalf("signing amount 9007199254740993 (JCS form 9007199254740992): %v", err)
	}
	// The holder signs 9007199254740992; a relay writes the number with the
	// same JCS form (9007199254740993), or 2^53 as 9.007199254740992e15:
	// the signature would verify, the envelope is refused.
	for i, forge := range []string{"9007199254740993", "9.007199254740992e15", "9007199254740992.0"} {
		signed := peerSign(t, submit(fmt.Sprintf("forged-%d", i), `{"text":"pay","amount":9007199254740992}`), env.Agent.PrivateKey())
		forged := bytes.Replace(signed, []byte("9007199254740992"), []byte(forge), 1)
		// (An envelope that does not parse is answered 400 with its code.)
		status, reply, body := peerPost(t, srv, "", forged, "")
		if reply != nil {
			if res, ok := reply.Body.(*ldp.TaskResult); ok {
				t.Fatalf("a signature over amount 9007199254740992 ran a task for the amount the relay wrote as %s: %s", forge, res.Output)
			}
		}
		if status != 400 || !strings.Contains(string(body), `"code":"`+string(ldp.ReasonMalformed)+`"`) || !strings.Contains(string(body), "JCS form") {
			t.Fatalf("rewritten as %s: %d %s, want 400 %s", forge, status, body, ldp.ReasonMalformed)
		}
	}
	// The holder's signed bytes themselves run, and the tool sees the
	// number signed.
	signed := peerSign(t, submit("pay", `{"text":"pay","amount":9007199254740992}`), env.Agent.PrivateKey())
	_, reply, body := peerPost(t, srv, "", signed, "")
	if res, ok := reply.Body.(*ldp.TaskResult); !ok || !strings.Contains(string(res.Output), `\"amount\":9007199254740992`) {
		t.Fatalf("the holder's signed task: %s", body)
	}
	// ldp.Client writes numbers in their JCS form before signing: 1.0 and
	// 1E2 reach the tool as 1 and 100.
	reply = peerSubmit(t, s, "canon", "args", `{"text":"n","n":1.0,"e":1E2}`, nil)
	res, ok := reply.Body.(*ldp.TaskResult)
	if !ok || !strings.Contains(string(res.Output), `\"e\":100`) || !strings.Contains(string(res.Output), `\"n\":1,`) {
		t.Fatalf("a client task with 1.0 and 1E2: %+v", reply.Body)
	}
	if n := peerAllowed(t, srv, "echo", 2); n != 2 {
		t.Fatalf("%d echo calls allowed, want 2", n)
	}
}

// TestLDPSignedTaskBearerUnsigned: a TASK_SUBMIT signed by the token's holder
// without a delegateos member runs under the request's Authorization:
// Bearer token, which the signature does not cover. A relay that has seen
// another token of the same holder (one it carried to another delegate,
// with a larger budget) adds it as the bearer: the holder's signed task,
// which it meant to run under its session's token (spent), runs and is
// charged under the other token (rtldp3 #2). Now an Ed25519 envelope's
// token comes only from its signed members, and a bearer other than that
// token is refused BEARER_UNSIGNED.
func TestLDPSignedTaskBearerUnsigned(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, _ := peerServe(t, env, mcptest.NewKey(t, "server"), "")
	small := env.Mint(mcptest.Budget(100), "mcp:echo:*")
	other := env.Mint(mcptest.Budget(100_000), "mcp:echo:*")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, small)
	// The session's token pays for one task.
	if reply := peerSubmit(t, s, "first", "echo", `"one"`, nil); peerFailCode(reply) != "" {
		t.Fatalf("first task: %+v", reply.Body)
	}
	// The holder signs its second task, meant for the session's token
	// (which will refuse it: budget_exceeded), and sends it without a
	// bearer; the relay adds the other token as Authorization: Bearer.
	e := peerEnvelope(s.ID, "ldp:delegate:holder", &ldp.TaskSubmit{TaskID: "second", Skill: "echo", Input: json.RawMessage(`"two"`)}, ldp.ModeText)
	signed := peerSign(t, e, env.Agent.PrivateKey())
	_, reply, body := peerPost(t, srv, "", signed, other.String())
	if res, ok := reply.Body.(*ldp.TaskResult); ok {
		delegation := ""
		if d := res.Provenance.DelegateOS; d != nil {
			if a, err := ldp.ParseTaskAttestation(d.Attestation); err == nil {
				delegation = a.DelegationID
			}
		}
		t.Fatalf("the unsigned bearer header chose the token of a signed task: it ran under delegation %s (the relay's token is %s, the session's %s)",
			delegation, other.Unverified().Authority.DelegationID, small.Unverified().Authority.DelegationID)
	}
	if code := peerFailCode(reply); code != ldp.CodeBearerUnsigned {
		t.Fatalf("refused with %q, want %s: %s", code, ldp.CodeBearerUnsigned, body)
	}
	// Sent as the holder meant it (anew: the refused envelope's message_id
	// is spent), the task runs under the session's token, which refuses it.
	e = peerEnvelope(s.ID, "ldp:delegate:holder", &ldp.TaskSubmit{TaskID: "second", Skill: "echo", Input: json.RawMessage(`"two"`)}, ldp.ModeText)
	_, reply, body = peerPost(t, srv, "", peerSign(t, e, env.Agent.PrivateKey()), "")
	if code := peerFailCode(reply); code != "budget_exceeded" {
		t.Fatalf("the holder's task under its session's token: %q %s", code, body)
	}
}
