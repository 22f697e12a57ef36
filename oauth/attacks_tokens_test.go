//go:build unix

package oauth_test

// The red team's findings on the authorization server (issue 23), once
// fixed: each test failed while its attack worked.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// callWithToken is a tools/call whose params carry tok as
// params._delegateos.dct, the per-request token serve documents ("Clients
// give their own per session in an Authorization: Bearer header, or per
// request in params._delegateos").
func callWithToken(id, tool string, args map[string]any, tok string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args, "_delegateos": map[string]any{"dct": tok}}})
	return string(b)
}

// readOK reports whether a read_file call answered the file's text.
func readOK(r *mcptest.HTTPResponse) bool {
	return r.Status == http.StatusOK && strings.Contains(string(r.Body), "Project Atlas")
}

// A DPoP-bound access token must be worthless without its key's proof
// (RFC 9449 §7). Protect only looks at the Authorization header; the same
// token put in params._delegateos.dct of a call, in a session opened with
// any token Protect lets through (here: the attacker's own narrow bearer
// token), is used by the gate with no proof at all.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedDPoPTokenWithoutProofInParams).
func TestParamsTokenDPoPNeedsItsProof(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	victim := a.register(t, "victim")
	key := newDPoPKey(t)
	tr := victim.tokens("mcp:echo:* docs:read:/project/**", key.proof("POST", a.srv.Base+"/token", "", time.Now()))
	if tr["token_type"] != "DPoP" {
		t.Fatalf("victim's token: %v", tr)
	}
	stolen := tr["access_token"].(string)
	// Its holder, with the proof, still reads files: the session's own
	// DPoP token is accepted.
	vh := func() map[string]string {
		return map[string]string{"Authorization": "DPoP " + stolen, "DPoP": key.proof("POST", a.srv.URL, stolen, time.Now())}
	}
	ir := a.initialize(t, vh())
	vsid := ir.Header.Get("Mcp-Session-Id")
	if ir.Status != http.StatusOK || vsid == "" {
		t.Fatalf("the DPoP token's holder, with its proof: initialize HTTP %d", ir.Status)
	}
	h := vh()
	h["Mcp-Session-Id"] = vsid
	if r := a.srv.Do(http.MethodPost, "/mcp", h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusAccepted {
		t.Fatalf("notifications/initialized with a fresh proof: HTTP %d", r.Status)
	}
	if r := a.srv.Post(vsid, vh(), mcptest.CallBody("8", "read_file", map[string]any{"path": "/project/README.md"})); !readOK(r) {
		t.Fatalf("the DPoP token's holder, with its proof, cannot read: HTTP %d %s", r.Status, r.Body)
	}
	// The attacker's own approval: echo only, bearer.
	attacker := a.register(t, "attacker")
	own := attacker.tokens("mcp:echo:*", "")["access_token"].(string)
	sid := a.srv.Initialize(bearer(own))
	if r := a.srv.Post(sid, bearer(own), mcptest.CallBody("9", "read_file", map[string]any{"path": "/project/README.md"})); readOK(r) {
		t.Fatalf("the attacker's own token reads files: the test proves nothing")
	}
	r := a.srv.Post(sid, bearer(own), callWithToken("1", "read_file", map[string]any{"path": "/project/README.md"}, stolen))
	if readOK(r) {
		t.Errorf("a stolen DPoP-bound token, sent with no proof in params._delegateos.dct, read a file the attacker's own token may not: HTTP %d", r.Status)
	}
	// Nor in another of its forms (the JSON wrapper, surrounding
	// whitespace), which the gate reads as the same token.
	for i, form := range []string{`{"token":"` + stolen + `","format":"` + dct.Format + `"}`, " " + stolen + "\n"} {
		if r := a.srv.Post(sid, bearer(own), callWithToken(fmt.Sprint(3+i), "read_file", map[string]any{"path": "/project/README.md"}, form)); readOK(r) {
			t.Errorf("a stolen DPoP-bound token in another form (%d), with no proof, read a file in params._delegateos.dct", i)
		}
	}
	// The same route takes an attenuation of the grant this process did
	// not issue, which TestForeignGrantTokenRefused refuses in
	// Authorization.
	handMade := mcptest.Attenuate(t, a.grant, a.e.Agent, mcptest.NewKey(t, "other"), 10, "docs:read:/project/**")
	if r := a.initialize(t, bearer(handMade.String())); r.Status != http.StatusUnauthorized {
		t.Fatalf("the hand-made attenuation in Authorization: HTTP %d, want 401", r.Status)
	}
	r = a.srv.Post(sid, bearer(own), callWithToken("2", "read_file", map[string]any{"path": "/project/README.md"}, handMade.String()))
	if readOK(r) {
		t.Errorf("an attenuation of the grant this server did not issue, refused in Authorization, read a file in params._delegateos.dct: HTTP %d", r.Status)
	}
}

// Ending a family (a rotated refresh token presented again: the tokens
// were stolen) must end its access tokens. Protect forgets them, so they
// are refused in Authorization; in params._delegateos.dct they still
// authorize until they expire.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedEndedTokenInParams).
func TestParamsTokenOfEndedFamilyRefused(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	tr := c.tokens("mcp:echo:* docs:read:/project/**", "")
	tok := tr["access_token"].(string)
	other := a.register(t, "other")
	own := other.tokens("mcp:echo:*", "")["access_token"].(string)
	sid := a.srv.Initialize(bearer(own))
	rt := tr["refresh_token"].(string)
	if st, _ := c.refresh(rt, ""); st != http.StatusOK {
		t.Fatalf("refresh: %d", st)
	}
	if st, m := c.refresh(rt, ""); st != http.StatusBadRequest {
		t.Fatalf("reuse: %d %v", st, m)
	}
	if r := a.initialize(t, bearer(tok)); r.Status != http.StatusUnauthorized {
		t.Fatalf("the ended token in Authorization: HTTP %d (want 401, as TestRefreshRotationAndReuse checks)", r.Status)
	}
	r := a.srv.Post(sid, bearer(own), callWithToken("1", "read_file", map[string]any{"path": "/project/README.md"}, tok))
	if readOK(r) {
		t.Fatalf("an access token of a family ended by refresh reuse still reads files in params._delegateos.dct: HTTP %d %s", r.Status, r.Body)
	}
}

// After a restart the server forgets what it issued, so it refuses a
// DPoP-bound token issued before, as Bearer and as DPoP (that holds: the
// first checks). The token still authorizes in params._delegateos.dct,
// without a proof, for the rest of its hour.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedDPoPTokenAfterRestartInParams).
func TestParamsTokenDPoPRefusedAfterRestart(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	e := a.e
	c := a.register(t, "victim")
	key := newDPoPKey(t)
	old := c.tokens("mcp:echo:* docs:read:/project/**", key.proof("POST", a.srv.Base+"/token", "", time.Now()))["access_token"].(string)
	a.srv.Signal(os.Interrupt)
	if !a.srv.WaitExit(mcptest.CallTimeout) {
		t.Fatal("serve did not stop")
	}
	a.srv = e.StartServe(mcptest.ServeOptions{Policy: a.policy, Flags: []string{"--authorize", "--grant", "@" + filepath.Join(e.Dir, "grant.tok"),
		"--grant-key", filepath.Join(e.Dir, e.Agent.Name()+".key"), "--consent-password", "@" + filepath.Join(e.Dir, "consent.pw")}})
	if r := a.initialize(t, bearer(old)); r.Status != http.StatusUnauthorized {
		t.Fatalf("the old DPoP token as Bearer after a restart: HTTP %d, want 401", r.Status)
	}
	if r := a.initialize(t, map[string]string{"Authorization": "DPoP " + old, "DPoP": key.proof("POST", a.srv.URL, old, time.Now())}); r.Status != http.StatusUnauthorized {
		t.Fatalf("the old DPoP token with its proof after a restart: HTTP %d, want 401", r.Status)
	}
	attacker := a.register(t, "attacker")
	own := attacker.tokens("mcp:echo:*", "")["access_token"].(string)
	sid := a.srv.Initialize(bearer(own))
	if r := a.srv.Post(sid, bearer(own), callWithToken("1", "read_file", map[string]any{"path": "/project/README.md"}, old)); readOK(r) {
		t.Fatalf("a DPoP-bound token issued before the restart, with no proof, read a file in params._delegateos.dct after it")
	}
}

// A token is for the resource it was issued for (RFC 8707; the MCP
// authorization spec: a server MUST only accept tokens issued for it).
// An operator running two gates with --authorize, each with a grant of the
// same root (two tool servers of one team), finds a token server A issued
// accepted by server B, and a DPoP-bound one accepted there as a plain
// Bearer token with no proof: B's Protect only refuses tokens of its own
// grant, and the DCT names no audience.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedTokenForAnotherResource).
func TestTokenForAnotherResourceRefused(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	e := a.e
	grantB := e.Mint(func(p *dct.CreateParams) { p.MaxChainDepth = 3 }, grantCaps...)
	grantFile := filepath.Join(e.Dir, "grant-b.tok")
	if err := os.WriteFile(grantFile, []byte(grantB.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := e.StartServe(mcptest.ServeOptions{Policy: a.policy, Flags: []string{"--authorize", "--grant", "@" + grantFile,
		"--grant-key", filepath.Join(e.Dir, e.Agent.Name()+".key"), "--consent-password", "@" + filepath.Join(e.Dir, "consent.pw")}})
	c := a.register(t, "c")
	key := newDPoPKey(t)
	tr := c.tokens("mcp:echo:*", key.proof("POST", a.srv.Base+"/token", "", time.Now()))
	tok := tr["access_token"].(string)
	if tr["token_type"] != "DPoP" {
		t.Fatalf("token: %v", tr)
	}
	ab := &asEnv{e: e, srv: b, grant: grantB, policy: a.policy}
	if r := ab.initialize(t, bearer(tok)); r.Status != http.StatusUnauthorized {
		t.Fatalf("server B (%s) accepted, as a Bearer token with no proof, a DPoP-bound token server A (%s) issued for its own resource: HTTP %d", b.URL, a.srv.URL, r.Status)
	}
	if r := ab.initialize(t, map[string]string{"Authorization": "DPoP " + tok, "DPoP": key.proof("POST", b.URL, tok, time.Now())}); r.Status != http.StatusUnauthorized {
		t.Errorf("server B accepted A's DPoP-bound token with a proof for B: HTTP %d", r.Status)
	}
	// A bearer token A issued, in B's Authorization and in a call's
	// params at B (a session opened with a token B issued).
	atok := c.tokens("mcp:echo:* docs:read:/project/**", "")["access_token"].(string)
	if r := ab.initialize(t, bearer(atok)); r.Status != http.StatusUnauthorized {
		t.Errorf("server B accepted a bearer token A issued: HTTP %d", r.Status)
	}
	own := ab.register(t, "b-client").tokens("mcp:echo:*", "")["access_token"].(string)
	sid := b.Initialize(bearer(own))
	if r := b.Post(sid, bearer(own), callWithToken("1", "read_file", map[string]any{"path": "/project/README.md"}, atok)); readOK(r) {
		t.Errorf("a bearer token A issued read a file at B in params._delegateos.dct")
	}
	// A still takes its own.
	if r := a.initialize(t, bearer(atok)); r.Status != http.StatusOK {
		t.Errorf("A refused its own bearer token: HTTP %d", r.Status)
	}
}

// Any stranger can reach the password check: register, open a consent
// page of its own (GET /authorize), post wrong passwords. That closes
// only the stranger's page (a sixth guess there is refused); the
// operator's right password on the operator's own page still approves.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedStrangerCannotLockOperatorOut).
func TestConsentStrangerCannotLockOperatorOut(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "legit")
	req, csrf := c.consentPage("mcp:echo:*")
	stranger := a.register(t, "stranger")
	sreq, scsrf := stranger.consentPage("mcp:echo:*")
	for i := 0; i < 5; i++ {
		f := approveForm(sreq, scsrf, "0")
		f.Set("password", fmt.Sprint("x", i))
		stranger.submit(f, nil)
	}
	f := approveForm(sreq, scsrf, "0")
	f.Set("password", "x5")
	if res, _ := stranger.submit(f, nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a sixth guess on the stranger's page: HTTP %d, want 400 (closed)", res.StatusCode)
	}
	// More pages, more guesses: past ConsentGlobalFailures (20) they are
	// slowed (one check a second), not refused, and the operator's turn
	// comes.
	for p := 0; p < 4; p++ {
		sreq, scsrf := stranger.consentPage("mcp:echo:*")
		for i := 0; i < 5 && p*5+i < 17; i++ {
			f := approveForm(sreq, scsrf, "0")
			f.Set("password", fmt.Sprint("y", p, i))
			if res, _ := stranger.submit(f, nil); res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("guess %d on page %d: HTTP %d, want 401", i, p, res.StatusCode)
			}
		}
	}
	if res, body := c.submit(approveForm(req, csrf, "0"), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's right password after a stranger's five wrong ones on its own page: HTTP %d (%s)", res.StatusCode, problem(body))
	}
}

// problem is the message of a consent page or error page.
func problem(page string) string {
	if i := strings.Index(page, `id="problem">`); i >= 0 {
		rest := page[i+len(`id="problem">`):]
		if j := strings.Index(rest, "<"); j >= 0 {
			return rest[:j]
		}
	}
	return mcptest.JSON(len(page))
}

// A stranger (no password, no approval: only registrations and GETs of
// /authorize, which anyone may make) floods the pending consent pages:
// with one client it forgets only its own (4 kept), with many it fills
// MaxPending (256) and then the pages of the clients with the most go;
// the operator's open page stays, and its approval goes through.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedPendingFloodKeepsOperatorsConsent).
func TestConsentPendingFloodKeepsOperatorsPage(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "legit")
	req, csrf := c.consentPage("mcp:echo:*")
	stranger := a.register(t, "stranger")
	for i := 0; i < 256; i++ {
		if res, _ := stranger.get(stranger.authorizeParams("mcp:echo:*")); res.StatusCode != http.StatusOK {
			t.Fatalf("stranger's authorize %d: HTTP %d", i, res.StatusCode)
		}
	}
	for i := 0; i < 70; i++ {
		s := a.register(t, fmt.Sprint("stranger", i))
		for j := 0; j < 4; j++ {
			if res, _ := s.get(s.authorizeParams("mcp:echo:*")); res.StatusCode != http.StatusOK {
				t.Fatalf("stranger %d's authorize %d: HTTP %d", i, j, res.StatusCode)
			}
		}
	}
	if res, body := c.submit(approveForm(req, csrf, "0"), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's approval after strangers' GET /authorize floods: HTTP %d (%s): a stranger evicts the operator's consent page", res.StatusCode, problem(body))
	}
}

// One approved client holding one access token could make the server hold
// MaxIssued exchanged tokens (about 16 KB each, with a key the server
// made), until its subject expired, and fill the map for every client.
// Now an approval has at most MaxExchangedPerFamily (64) live exchanged
// tokens, whichever of its tokens is the subject, and other clients'
// grants go on.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedExchangeBoundedPerApproval).
func TestExchangeBoundedPerApproval(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "agent")
	tr := c.tokens("mcp:echo:*", "")
	parent := tr["access_token"].(string)
	exchange := func(subject string) (int, map[string]any) {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {subject},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}, "scope": {"mcp:echo:*"}}.Encode()
		return a.post(t, "/token", "application/x-www-form-urlencoded", form, nil)
	}
	var child string
	for i := 0; i < 64; i++ {
		st, m := exchange(parent)
		if st != http.StatusOK {
			t.Fatalf("exchange %d: %d %v", i, st, m)
		}
		child = m["access_token"].(string)
	}
	if st, m := exchange(parent); st != http.StatusTooManyRequests {
		t.Fatalf("exchange 65 of one approval: %d %v, want 429", st, m["error"])
	}
	// Another subject of the same approval: an exchanged token, or the
	// access token a refresh gives.
	if st, m := exchange(child); st != http.StatusTooManyRequests {
		t.Errorf("exchange of an exchanged token past the approval's bound: %d %v, want 429", st, m["error"])
	}
	st, m := c.refresh(tr["refresh_token"].(string), "")
	if st != http.StatusOK {
		t.Fatalf("refresh: %d %v", st, m)
	}
	if st, m := exchange(m["access_token"].(string)); st != http.StatusTooManyRequests {
		t.Errorf("exchange of the refreshed access token past the approval's bound: %d %v, want 429", st, m["error"])
	}
	// Another client's grants are untouched, and its own exchanges work.
	other := a.register(t, "other")
	if st, m := exchange(other.tokens("mcp:echo:*", "")["access_token"].(string)); st != http.StatusOK {
		t.Errorf("another approval's exchange: %d %v", st, m)
	}
}

// Reuse detection ends a family when a rotated refresh token comes back
// (the tokens were stolen). Only the last 64 rotated tokens' hashes are
// kept, but a refresh token names its family and generation, so one
// copied by a thief and presented 65 rotations later still ends the
// family. A made-up generation under an unknown family ends nothing.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedReuseDetectedAfter64Rotations).
func TestRefreshReuseDetectedAfter64Rotations(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	tr := c.tokens("mcp:echo:*", "")
	stolen := tr["refresh_token"].(string)
	rt := stolen
	for i := 0; i < 65; i++ {
		st, m := c.refresh(rt, "")
		if st != http.StatusOK {
			t.Fatalf("refresh %d: %d %v", i, st, m)
		}
		rt = m["refresh_token"].(string)
	}
	// Made-up tokens: another family's ID, a generation not yet issued,
	// a non-canonical one. They are unknown, and end nothing.
	famID, _, _ := strings.Cut(rt, ".")
	for _, forged := range []string{"0123456789abcdef0123456789abcdef.0.x", famID + ".99999.x", famID + ".+1.x", famID + ".01.x"} {
		if st, m := c.refresh(forged, ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
			t.Fatalf("a made-up refresh token: %d %v", st, m["error"])
		}
	}
	st, m := c.refresh(rt, "")
	if st != http.StatusOK {
		t.Fatalf("the live refresh token after made-up ones: %d %v", st, m["error"])
	}
	rt, access := m["refresh_token"].(string), m["access_token"].(string)
	if st, m := c.refresh(stolen, ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Fatalf("the stolen refresh token: %d %v", st, m["error"])
	}
	if st, m := c.refresh(rt, ""); st == http.StatusOK {
		t.Fatalf("a refresh token rotated 66 times ago came back, and the family lives on (newest refresh: %v)", m["token_type"])
	}
	if r := a.initialize(t, bearer(access)); r.Status != http.StatusUnauthorized {
		t.Errorf("the family's access token after the reuse: HTTP %d, want 401", r.Status)
	}
}

// An access token is a bearer credential (its holder key is one the
// server keeps, or the client's DPoP key). The workspace's delegation log
// kept every issued token in full (chain.Delegation.DCT): whoever could
// read the log held live tokens. Now it keeps the chain down to the
// consent delegation only, and that token, like every token the log
// holds, is refused by the gate, in Authorization and in a call's params.
// Found by the red team of the authorization server (issue 23), fixed (was TestRTFixedIssuedTokensNotInDelegationLog).
func TestDelegationLogHoldsNoLiveToken(t *testing.T) {
	t.Parallel()
	a := startAS(t, func(e *mcptest.Env, p *mcptest.Policy) {
		e.KeyFile(mcptest.NewKey(t, "proxy"))
		p.Extra = "workspace: ws\naudit_log: audit.log\nproxy_key: proxy.key\n"
	})
	c := a.register(t, "c")
	tok := c.tokens("mcp:echo:* docs:read:/project/**", "")["access_token"].(string)
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {tok},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}, "scope": {"docs:read:/project/**"}}.Encode()
	st, m := a.post(t, "/token", "application/x-www-form-urlencoded", form, nil)
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, m["error"])
	}
	exchanged := m["access_token"].(string)
	approved := a.srv.WaitLog("oauth consent approved", nil)
	log, err := os.ReadFile(filepath.Join(a.e.Dir, "ws", "delegations.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"id":"`+approved["delegation"].(string)+`"`) {
		t.Fatalf("the consent delegation is not in the delegation log")
	}
	other := a.register(t, "other")
	own := other.tokens("mcp:echo:*", "")["access_token"].(string)
	sid := a.srv.Initialize(bearer(own))
	n := 0
	for _, line := range strings.Split(string(log), "\n") {
		var rec struct {
			Delegation struct {
				DCT dct.Serialized `json:"dct"`
			} `json:"delegation"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Delegation.DCT.Token == "" {
			continue
		}
		got, err := dct.ParseInput(rec.Delegation.DCT.Token)
		if err != nil {
			continue
		}
		for name, live := range map[string]string{"access": tok, "exchanged": exchanged} {
			if want, _ := dct.ParseInput(live); got.String() == want.String() {
				t.Errorf("the live %s token is stored in full in the delegation log", name)
			}
		}
		if got.Blocks() <= a.grant.Blocks() {
			continue // the grant's own chain: the operator's
		}
		n++
		if r := a.initialize(t, bearer(got.String())); r.Status != http.StatusUnauthorized {
			t.Errorf("a token of the delegation log (%d blocks) in Authorization: HTTP %d, want 401", got.Blocks(), r.Status)
		}
		if r := a.srv.Post(sid, bearer(own), callWithToken(fmt.Sprint(10+n), "read_file", map[string]any{"path": "/project/README.md"}, got.String())); readOK(r) {
			t.Errorf("a token of the delegation log (%d blocks) read a file in params._delegateos.dct", got.Blocks())
		}
	}
	if n == 0 {
		t.Fatalf("no OAuth delegation in the log")
	}
}
