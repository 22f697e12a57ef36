//go:build unix

package proxy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// TestApprovalForwardsWhatWasApproved: the SHA-256 the approval request
// shows the person is that of the bytes the upstream receives, with
// _delegateos cut out; 2026-07-28's call sent back with the answer is not
// what is forwarded, the first request is.
func TestApprovalForwardsWhatWasApproved(t *testing.T) {
	for _, modern := range []bool{false, true} {
		e := mcptest.NewEnv(t)
		pol := e.Policy()
		for i := range pol.Rules {
			if pol.Rules[i].Match == "write_file" {
				pol.Rules[i].Approval = "required"
			}
		}
		tok := e.Mint(nil, "docs:write:/project/**")
		wrap, record := recordUpstream(t, e)
		p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Wrap: wrap})
		a := &approver{answer: func(mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			return answerWith(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})
		}}
		o := mcptest.SessionOptions{Legacy: !modern, ClientOptions: []client.ClientOption{client.WithElicitationHandler(a)}}
		s := p.Connect(o)
		s.CallAs(t, tok.String(), "write_file", writeArgs("/project/exact.md")).OK(t, "approved write_file")
		asked := a.requests()
		if len(asked) != 1 {
			t.Fatalf("modern %v: asked %d times", modern, len(asked))
		}
		_, after, _ := strings.Cut(asked[0].Params.Message, "Request SHA-256: ")
		shown, _, _ := strings.Cut(after, "\n")
		var forwarded []string
		for _, l := range recordedThrough(t, record, `"write_file"`, 1) {
			if strings.Contains(l, `"write_file"`) {
				forwarded = append(forwarded, l)
			}
		}
		if len(forwarded) != 1 {
			t.Fatalf("modern %v: the upstream received %d write_file calls, want 1", modern, len(forwarded))
		}
		sum := sha256.Sum256([]byte(forwarded[0]))
		if got := hex.EncodeToString(sum[:]); shown == "" || got != shown {
			t.Errorf("modern %v: the person was shown SHA-256 %q; the upstream received %s (SHA-256 %s)", modern, shown, forwarded[0], got)
		}
		if strings.Contains(forwarded[0], "_delegateos") || strings.Contains(forwarded[0], "requestState") || strings.Contains(forwarded[0], "inputResponses") {
			t.Errorf("modern %v: forwarded %s", modern, forwarded[0])
		}
	}
}
