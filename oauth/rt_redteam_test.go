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

	"github.com/delegateos/delegateos/internal/mcptest"
)

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
