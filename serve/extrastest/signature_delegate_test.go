//go:build unix

package extrastest

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

// With signatures required, a call is signed by the holder of the token
// the gate decides it with. delegateos/delegate binds a token to the
// session for the calls that bring none: a client holding one token (and
// its key) must not bind another, whose key it lacks, and then make calls
// that run under it while signing them as the holder of its own.
func TestSignedSessionCannotBindForeignToken(t *testing.T) {
	e := mcptest.NewEnv(t)
	mallory := mcptest.NewKey(t, "mallory")
	b := mcptest.NewKey(t, "b")
	// Mallory's own token: echo only, held by her key.
	mTok := e.Mint(func(p *dct.CreateParams) { p.Delegatee = mallory.ID() }, "mcp:echo:*")
	// A token held by b, and its contract, which Mallory obtained.
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
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--require-signature"}})
	bearer := mcptest.Bearer(mTok)

	res := srv.Do(http.MethodPost, "/mcp", with(bearer, sign(t, mallory, "POST", "/mcp", initBody, time.Now())), initBody)
	if res.Status != 200 {
		t.Fatalf("signed initialize: %d %s", res.Status, res.Body)
	}
	sid := res.Header.Get("Mcp-Session-Id")
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	if r := srv.Post(sid, with(bearer, sign(t, mallory, "POST", "/mcp", note, time.Now())), note); r.Status != 202 {
		t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	params, _ := json.Marshal(gate.DelegateParams{Contract: cb, DCT: bTok.String(), DCTFormat: dct.Format,
		DelegationID: bTok.Unverified().Attenuations[0].DelegationID, ParentDelegationID: aTok.Unverified().Authority.DelegationID})
	for i, delegate := range []string{
		`{"jsonrpc":"2.0","id":"d1","method":"delegateos/delegate","params":` + string(params) + `}`,
		`{"jsonrpc":"2.0","method":"delegateos/delegate","params":` + string(params) + `}`, // as a notification
	} {
		srv.Post(sid, with(bearer, sign(t, mallory, "POST", "/mcp", delegate, time.Now())), delegate)
		call := mcptest.CallBody(strconv.Itoa(10+i), "read_file", map[string]any{"path": "/project/sub/notes.md"})
		r := srv.Post(sid, with(bearer, sign(t, mallory, "POST", "/mcp", call, time.Now())), call)
		if strings.Contains(string(r.Body), `"result"`) {
			t.Fatalf("a call signed by the session token's holder ran under a bound token held by another key: HTTP %d %s", r.Status, r.Body)
		}
	}
}
