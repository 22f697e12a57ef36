package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/reputation"
)

// Helpers of the third LDP red team (rtldp3, issue 21).

// peerSection is serveLDPSection with a second skill, args, whose input
// object is the echo tool's arguments (echo shows the raw arguments it
// received).
const peerSection = serveLDPSection + "    - {name: args, tool: echo}\n"

// peerServe runs serve as the LDP delegate ldp:delegate:docs (echo at 100
// microcents) with a workspace, keyed by serverKey; extra is appended to
// the policy.
func peerServe(t *testing.T, env *mcptest.Env, serverKey *identity.Keypair, extra string) (*mcptest.Server, string) {
	t.Helper()
	ws := filepath.Join(env.Dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = peerSection + "workspace: " + strconv.Quote(ws) + "\n" + extra
	return env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(serverKey)}}), ws
}

// peerOpen opens a text session at srv for key's holder of tok.
func peerOpen(t *testing.T, srv *mcptest.Server, id string, key *identity.Keypair, tok *dct.Token) *ldp.ClientSession {
	t.Helper()
	c := &ldp.Client{ID: id, TrustDomain: "research", Key: key.PrivateKey(), Verifier: &ldp.Verifier{}}
	var m *ldp.DelegateOSMember
	if tok != nil {
		m = &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	}
	s, err := c.Open(context.Background(), srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, m, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// peerAttestation is an ATTESTATION of delegate's work on taskID, by by:
// positive with weight 1, or negative (with an evidence hash, which a
// negative one needs).
func peerAttestation(t *testing.T, by *identity.Keypair, delegate, taskID string, positive bool) *ldp.Attestation {
	t.Helper()
	a := &reputation.Attestation{ToDID: delegate, Outcome: reputation.OutcomePositive, Weight: 1, Context: "ldp:ldp:delegate:docs:" + taskID}
	if !positive {
		a.Outcome, a.EvidenceHash = reputation.OutcomeNegative, strings.Repeat("ab", 32)
	}
	if err := reputation.SignAttestation(a, by); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a)
	return &ldp.Attestation{Claim: b, Evidence: json.RawMessage(`{}`)}
}

// peerSend sends b in s and returns the refusal's code, "" when taken.
func peerSend(t *testing.T, s *ldp.ClientSession, b ldp.Body) string {
	t.Helper()
	reply, err := s.Send(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if reply == nil {
		return ""
	}
	return peerFailCode(reply)
}

// peerSignals is how many signals the workspace holds for did.
func peerSignals(t *testing.T, ws, did string) int {
	t.Helper()
	out, errs, code := mcptest.CLI(t, "reputation", "show", did, "--workspace", ws, "--json")
	if code != 0 {
		if strings.Contains(out+errs, "no profile") || strings.Contains(out+errs, "not found") {
			return 0
		}
		t.Fatalf("reputation show: exit %d\n%s%s", code, out, errs)
	}
	var p struct {
		Signals int `json:"signals"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("reputation show: %v\n%s", err, out)
	}
	return p.Signals
}

// peerSubmit submits a text task in s under tok (nil: the session's) and
// returns the reply.
func peerSubmit(t *testing.T, s *ldp.ClientSession, taskID, skill, input string, tok *dct.Token) *ldp.Envelope {
	t.Helper()
	var m *ldp.DelegateOSMember
	if tok != nil {
		m = &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	}
	reply, err := s.Submit(context.Background(), &ldp.TaskSubmit{TaskID: taskID, Skill: skill, Input: json.RawMessage(input)}, ldp.ModeText, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	return reply
}
