package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPSignedTaskOtherForms: a relay rewrites, under the holder's
// Ed25519 signature, the forms of a signed TASK_SUBMIT's input that JCS
// (what the signature covers) does not tell apart, deep in arrays and
// objects: 0 as -0, 300 as 3e2 inside an object inside an array, 7 as 7.0
// in a nested array: each is refused envelope_malformed (not in its JCS
// form), so no tool sees a form the holder did not write. A string that
// looks like a number written as the number is another JCS form: the
// signature fails. A string escaped otherwise ("p\u0061y") has the same
// JCS form and the same value: the task runs, and the tool gets the JCS
// form, which is what was signed (rtldp4, held).
func TestLDPSignedTaskOtherForms(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, _ := peerServe(t, env, mcptest.NewKey(t, "server"), "")
	tok := env.Mint(nil, "mcp:echo:*")
	s := peerOpen(t, srv, "ldp:delegate:holder", env.Agent, tok)
	const input = `{"text":"pay","zero":0,"deep":[[7,{"k":300}]],"s":"12345"}`
	signed := func(id string) []byte {
		return peerSign(t, holderArgsTask(s, tok, id, input), env.Agent.PrivateKey())
	}
	for i, c := range []struct{ from, to, want string }{
		{`"zero":0`, `"zero":-0`, "JCS form"},
		{`{"k":300}`, `{"k":3e2}`, "JCS form"},
		{`[[7,`, `[[7.0,`, "JCS form"},
		{`"zero":0`, `"zero":0E0`, "JCS form"},
	} {
		b := signed(fmt.Sprintf("forged-%d", i))
		// The input is inside the envelope as a JSON value (not a string).
		if !bytes.Contains(b, []byte(c.from)) {
			t.Fatalf("%s is not in the signed bytes: %s", c.from, b)
		}
		status, reply, body := peerPost(t, srv, "", bytes.Replace(b, []byte(c.from), []byte(c.to), 1), "")
		if reply != nil {
			if _, ok := reply.Body.(*ldp.TaskResult); ok {
				t.Fatalf("%s rewritten as %s under the holder's signature ran: %s", c.from, c.to, body)
			}
		}
		if status != 400 || !strings.Contains(string(body), `"code":"`+string(ldp.ReasonMalformed)+`"`) || !strings.Contains(string(body), c.want) {
			t.Fatalf("%s rewritten as %s: %d %s, want 400 %s", c.from, c.to, status, body, ldp.ReasonMalformed)
		}
	}
	// The string "12345" written as the number: another JCS form.
	b := signed("unquoted")
	_, reply, body := peerPost(t, srv, "", bytes.Replace(b, []byte(`"s":"12345"`), []byte(`"s":12345`), 1), "")
	if code := peerFailCode(reply); code != string(ldp.ReasonTampered) {
		t.Fatalf("a signed string rewritten as a number: %q %s, want %s", code, body, ldp.ReasonTampered)
	}
	// Another escape of the same string runs; the tool sees the signed form.
	b = signed("escaped")
	_, reply, body = peerPost(t, srv, "", bytes.Replace(b, []byte(`"text":"pay"`), []byte(`"text":"p\u0061y"`), 1), "")
	res, ok := reply.Body.(*ldp.TaskResult)
	if !ok || !strings.Contains(string(res.Output), `\"text\":\"pay\"`) || strings.Contains(string(res.Output), `u0061`) {
		t.Fatalf("the same string escaped otherwise: %s", body)
	}
	if n := peerAllowed(t, srv, "echo", 1); n != 1 {
		t.Fatalf("%d echo calls allowed, want 1 (only the escaped one)", n)
	}
}
