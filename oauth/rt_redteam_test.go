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
