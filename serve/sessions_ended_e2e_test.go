//go:build unix

package serve_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Once a delegation ends (completed), the sessions of its delegatee's token
// hold no slot and no upstream: the next request is refused and the
// session closed with its upstream.
func TestServeEndedDelegationSessionsClosed(t *testing.T) {
	e := mcptest.NewEnv(t)
	b := mcptest.NewKey(t, "b")
	aTok := e.Mint(func(p *dct.CreateParams) { p.ContractID = "ct_aaaaaaaaaaaa" }, "mcp:echo:*")
	delA := aTok.Unverified().Authority.DelegationID
	delB := mcptest.NewDelegationID()
	bTok, err := dct.Attenuate(aTok, dct.AttenuateParams{Attenuator: e.Agent, Delegatee: b.ID(), DelegationID: delB,
		ContractID: "ct_bbbbbbbbbbbb", Capabilities: &[]dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.Create(e.Agent, contract.CreateParams{ID: "ct_bbbbbbbbbbbb", Title: "Echo once",
		Inputs:              json.RawMessage(`{}`),
		OutputSchema:        json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":5}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), RequiredCapabilities: []string{"mcp:echo"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pol := e.Policy()
	pol.Extra = "workspace: " + strconv.Quote(filepath.Join(e.Dir, "workspace")) + "\n"
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--recheck-interval", "1h"}})

	hers := srv.Initialize(mcptest.Bearer(bTok))
	pid := sessionUpstreamPID(t, srv, hers)
	if r := ping(srv, hers, bTok); r.Status != http.StatusOK {
		t.Fatalf("ping before the delegation ended: HTTP %d %s", r.Status, r.Body)
	}
	owner := srv.Initialize(mcptest.Bearer(aTok))
	request := func(id, method string, params any) string {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		r := srv.Post(owner, mcptest.Bearer(aTok), string(body))
		if r.Status != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", method, r.Status, r.Body)
		}
		return mcptest.JSON(r.Messages())
	}
	cb, _ := json.Marshal(c)
	if got := request("d", gate.MethodDelegate, gate.DelegateParams{Contract: cb, DCT: bTok.String(), DCTFormat: dct.Format,
		DelegationID: delB, ParentDelegationID: delA}); !strings.Contains(got, `"accepted":true`) {
		t.Fatalf("delegate: %s", got)
	}
	a, err := attest.Create(b, attest.CreateParams{ContractID: c.ID, DelegationID: delB, Success: true,
		Output: json.RawMessage(`{"summary":"echoed once"}`), DurationMs: 10}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(a)
	if got := request("c", gate.MethodComplete, gate.CompleteParams{DelegationID: delB, Attestation: ab}); !strings.Contains(got, `"status":"completed"`) {
		t.Fatalf("complete: %s", got)
	}
	if r := ping(srv, hers, bTok); r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), "has ended") {
		t.Fatalf("ping after the delegation ended: HTTP %d %s", r.Status, r.Body)
	}
	mcptest.Eventually(t, "the ended delegation's session's upstream to exit", func() bool { return mcptest.ProcessGone(pid) })
	if got := initStatus(srv, bTok); got != http.StatusUnauthorized {
		t.Fatalf("a new session under the ended delegation: HTTP %d", got)
	}
}
