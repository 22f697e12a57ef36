package serve_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// delegateos/delegate binds a token to the relay's session: calls without
// a token of their own then run under it. A shared stateless relay serves
// different clients (here every anonymous one), so one of them delegating
// must not hand its token to the others.
func TestServeStatelessDelegateBindsNoOneElse(t *testing.T) {
	e := mcptest.NewEnv(t)
	b := mcptest.NewKey(t, "b")
	aTok := e.Mint(func(p *dct.CreateParams) { p.ContractID = "ct_aaaaaaaaaaaa" }, "docs:read:/project/**")
	bTok, err := dct.Attenuate(aTok, dct.AttenuateParams{Attenuator: e.Agent, Delegatee: b.ID(), DelegationID: mcptest.NewDelegationID(),
		ContractID: "ct_bbbbbbbbbbbb", Capabilities: &[]dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/**"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.Create(e.Agent, contract.CreateParams{ID: "ct_bbbbbbbbbbbb", Title: "Summarize the sub-project notes",
		Inputs:              json.RawMessage(`{"path":"/project/sub/notes.md"}`),
		OutputSchema:        json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
		Verification:        json.RawMessage(`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":20}}`),
		MaxBudgetMicrocents: 5000, Deadline: time.Now().Add(time.Hour), RequiredCapabilities: []string{"docs:read"},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := json.Marshal(c)
	pol := e.Policy()
	pol.Extra = "workspace: " + strconv.Quote(filepath.Join(e.Dir, "workspace")) + "\n"
	// Anonymous clients get the --token default: echo only.
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Token: e.Mint(nil, "mcp:echo:*")})
	stateless := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

	params, _ := json.Marshal(gate.DelegateParams{Contract: cb, DCT: bTok.String(), DCTFormat: dct.Format,
		DelegationID: bTok.Unverified().Attenuations[0].DelegationID, ParentDelegationID: aTok.Unverified().Authority.DelegationID})
	for _, delegate := range []string{
		`{"jsonrpc":"2.0","id":"alice-1","method":"delegateos/delegate","params":` + string(params) + `}`,
		`{"jsonrpc":"2.0","method":"delegateos/delegate","params":` + string(params) + `}`, // as a notification
	} {
		// Alice delegates with her token.
		srv.Do(http.MethodPost, "/mcp", stateless, delegate)
		// Mallory, another anonymous client, reads a document with no
		// token of her own.
		r := srv.Do(http.MethodPost, "/mcp", stateless, `{"jsonrpc":"2.0","id":"mallory-1","method":"tools/call","params":{"name":"read_file","arguments":{"path":"/project/sub/notes.md"},`+meta+`}}`)
		if ms := r.Messages(); len(ms) != 1 || ms[0]["error"] == nil || strings.Contains(string(r.Body), `"result"`) {
			t.Fatalf("another anonymous client's call ran under the token alice delegated with: HTTP %d %q", r.Status, r.Body)
		}
	}
}
