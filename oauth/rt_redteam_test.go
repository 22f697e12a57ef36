//go:build unix && redteam

package oauth_test

// Red team of the authorization server (issue 23): each test FAILS when
// the attack it names works. They run through the real binary:
//
//	go test -count=1 -tags redteam -run 'TestRT' ./oauth/

import (
	"os"
	"path/filepath"

	"encoding/json"
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
