//go:build unix && redteam

package oauth_test

// Red team of the authorization server (issue 23): each test FAILS when
// the attack it names works. They run through the real binary:
//
//	go test -count=1 -tags redteam -run 'TestRT' ./oauth/

import (
	"net/url"
	"os"
	"path/filepath"

	"encoding/json"
	"fmt"
	"github.com/delegateos/delegateos/dct"
	"net/http"
	"strings"
	"testing"
	"time"

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

// A DPoP-bound access token must be worthless without its key's proof
// (RFC 9449 §7). Protect only looks at the Authorization header; the same
// token put in params._delegateos.dct of a call, in a session opened with
// any token Protect lets through (here: the attacker's own narrow bearer
// token), is used by the gate with no proof at all.
func TestRTDPoPTokenWithoutProofInParams(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	victim := a.register(t, "victim")
	key := newDPoPKey(t)
	tr := victim.tokens("mcp:echo:* docs:read:/project/**", key.proof("POST", a.srv.Base+"/token", "", time.Now()))
	if tr["token_type"] != "DPoP" {
		t.Fatalf("victim's token: %v", tr)
	}
	stolen := tr["access_token"].(string)
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
func TestRTEndedTokenStillWorksInParams(t *testing.T) {
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

// A stranger (no password, no approval: only registrations and GETs of
// /authorize, which anyone may make) evicts the operator's open consent
// page: MaxPending (256) requests forget the oldest, so the operator's
// approval, typed a minute later, finds "expired". Kept up, no consent
// ever completes.
func TestRTPendingFloodEvictsOperatorsConsent(t *testing.T) {
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
	if res, body := c.submit(approveForm(req, csrf, "0"), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's approval after a stranger's 256 GET /authorize: HTTP %d (%s): a stranger evicts every consent page", res.StatusCode, problem(body))
	}
}

// The consent lock is global and any stranger can reach the password
// check: register, open a consent page of its own (GET /authorize), post
// five wrong passwords. The operator's right password on the operator's
// own page is then refused; five more a minute keep it so for ever.
func TestRTStrangerLocksOperatorOut(t *testing.T) {
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
	if res, body := c.submit(approveForm(req, csrf, "0"), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's right password after a stranger's five wrong ones on its own page: HTTP %d (%s)", res.StatusCode, problem(body))
	}
}

// readOK reports whether a read_file call answered the file's text.
func readOK(r *mcptest.HTTPResponse) bool {
	return r.Status == http.StatusOK && strings.Contains(string(r.Body), "Project Atlas")
}

func problem(page string) string {
	if i := strings.Index(page, `id="problem">`); i >= 0 {
		rest := page[i+len(`id="problem">`):]
		if j := strings.Index(rest, "<"); j >= 0 {
			return rest[:j]
		}
	}
	return mcptest.JSON(len(page))
}

// An access token is a bearer credential (its holder key is one the
// server keeps, or the client's DPoP key). The workspace's delegation log
// keeps every issued token in full (chain.Delegation.DCT): whoever can
// read the log (a backup, another local user, a support bundle) holds the
// live bearer tokens and the consent delegation's token, which with the
// params._delegateos hole above authorizes everything approved.
func TestRTIssuedBearerTokenStoredInDelegationLog(t *testing.T) {
	t.Parallel()
	a := startAS(t, func(e *mcptest.Env, p *mcptest.Policy) {
		e.KeyFile(mcptest.NewKey(t, "proxy"))
		p.Extra = "workspace: ws\naudit_log: audit.log\nproxy_key: proxy.key\n"
	})
	c := a.register(t, "c")
	tok := c.tokens("mcp:echo:* docs:read:/project/**", "")["access_token"].(string)
	log, err := os.ReadFile(filepath.Join(a.e.Dir, "ws", "delegations.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := dct.ParseInput(tok)
	for _, line := range strings.Split(string(log), "\n") {
		var rec struct {
			Delegation struct {
				DCT dct.Serialized `json:"dct"`
			} `json:"delegation"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Delegation.DCT.Token == "" {
			continue
		}
		if got, err := dct.ParseInput(rec.Delegation.DCT.Token); err == nil && got.String() == want.String() {
			t.Fatalf("the live bearer access token is stored in full in the delegation log %s", filepath.Join("ws", "delegations.jsonl"))
		}
	}
}

// A token is for the resource it was issued for (RFC 8707; the MCP
// authorization spec: a server MUST only accept tokens issued for it).
// An operator running two gates with --authorize, each with a grant of the
// same root (two tool servers of one team), finds a token server A issued
// accepted by server B, and a DPoP-bound one accepted there as a plain
// Bearer token with no proof: B's Protect only refuses tokens of its own
// grant, and the DCT names no audience.
func TestRTTokenForAnotherResourceAccepted(t *testing.T) {
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
	r := b.Do(http.MethodPost, "/mcp", bearer(tok), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r.Status == http.StatusOK {
		t.Fatalf("server B (%s) accepted, as a Bearer token with no proof, a DPoP-bound token server A (%s) issued for its own resource", b.URL, a.srv.URL)
	}
}

// One approved client holding one access token can make the server hold
// MaxIssued (100,000) exchanged tokens, each with a key the server made,
// until its subject expires (up to an hour for a DPoP one): the server's
// memory grows by what the test measures per token, and once the map is
// full every client's code and refresh grants fail ("too many live access
// tokens") — exchangeToken never sweeps expired ones, and nothing bounds
// exchanges per subject or per approval. The test stops at 1,001.
func TestRTExchangeUnboundedPerSubject(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "agent")
	parent := c.tokens("mcp:echo:*", "")["access_token"].(string)
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {parent},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}, "scope": {"mcp:echo:*"}}.Encode()
	rss := func() int64 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.srv.Cmd.Process.Pid))
		for _, l := range strings.Split(string(b), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(l, "VmRSS: %d kB", &kb); err == nil {
				return kb
			}
		}
		return 0
	}
	before := rss()
	const n = 1001
	for i := 0; i < n; i++ {
		if st, m := a.post(t, "/token", "application/x-www-form-urlencoded", form, nil); st != http.StatusOK {
			t.Logf("exchange %d refused: %d %v", i, st, m)
			return
		}
	}
	after := rss()
	t.Logf("RSS %d kB -> %d kB over %d exchanges: about %d bytes per exchanged token; MaxIssued (100,000) of them: about %d MiB",
		before, after, n, (after-before)*1024/n, (after-before)*1024/n*100_000>>20)
	t.Fatalf("one access token was exchanged %d times: nothing bounds the tokens one subject makes the server hold", n)
}

// Reuse detection ends a family when a rotated refresh token comes back
// (the tokens were stolen). Only the last 64 rotated tokens are kept: a
// thief who copied a refresh token and waited 64 rotations presents it
// and gets "unknown" — the family is not ended, the legitimate client's
// chain (and the thief's other stolen tokens) go on. LOW: the thief gets
// no token; the theft goes unnoticed.
func TestRTReuseDetectionForgetsAfter64Rotations(t *testing.T) {
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
	c.refresh(stolen, "")
	if st, m := c.refresh(rt, ""); st == http.StatusOK {
		t.Fatalf("a refresh token rotated 65 times ago came back, and the family lives on (newest refresh: %v)", m["token_type"])
	}
}

// After a restart the server forgets what it issued, so it refuses a
// DPoP-bound token issued before, as Bearer and as DPoP (that holds: the
// first checks). The token still authorizes in params._delegateos.dct,
// without a proof, for the rest of its hour.
func TestRTDPoPTokenReplayedAcrossRestartInParams(t *testing.T) {
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
