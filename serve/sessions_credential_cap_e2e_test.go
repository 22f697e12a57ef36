package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team (issue 26 item 3, bullet 4): --max-credential-sessions counts
// sessions by the token string, but the verifier (dct.ParseInput) also
// takes the {"token","format"} JSON wrapper of the same token, in any
// whitespace: each spelling is a new "credential". One token opens three
// (any number of) working sessions over --max-credential-sessions 2;
// only --max-tree-sessions (64 by default, here off) still bounds it.
// (Was TestRedteamCredentialCapByWrapperSpelling.)
func TestServeCredentialCapCountsEverySpelling(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{
		"--max-sessions", "10", "--max-credential-sessions", "2", "--max-tree-sessions", "0"}})
	hers := e.Mint(nil, "mcp:echo:*").String()
	spellings := []string{
		hers,
		`{"token":"` + hers + `","format":"` + dct.Format + `"}`,
		`{ "token":"` + hers + `","format":"` + dct.Format + `"}`,
	}
	for i, s := range spellings {
		hdr := map[string]string{"Authorization": "Bearer " + s}
		r := srv.Do(http.MethodPost, "/mcp", hdr, initializeBody)
		if i < 2 {
			if r.Status != http.StatusOK {
				t.Fatalf("session %d: HTTP %d %s", i, r.Status, r.Body)
			}
			continue
		}
		if r.Status != http.StatusTooManyRequests {
			sid := r.Header.Get("Mcp-Session-Id")
			call := srv.Post(sid, hdr, mcptest.CallBody("1", "echo", map[string]any{"text": "x"}))
			t.Fatalf("a third session of one token (spelled as its JSON wrapper) over --max-credential-sessions 2: HTTP %d; its call: HTTP %d, echoed %v",
				r.Status, call.Status, strings.Contains(string(call.Body), `"x"`))
		}
	}
}
