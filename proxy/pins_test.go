package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcpdef"
	"github.com/delegateos/delegateos/policy"
)

// echoTool is how the bench upstream lists echo.
const echoTool = `{"name":"echo","description":"Echo text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`

// pinSession is testSession with echo pinned as echoTool, in a lock file
// in a temporary directory; the proxy has listed the tools once, seeing
// echo as listed.
func pinSession(tb testing.TB, log *zap.Logger, toClient, toServer io.Writer, listed string) *session {
	tb.Helper()
	s := testSession(tb, log, toClient, toServer)
	def, err := mcpdef.Read(mcpdef.Tool, []byte(echoTool))
	if err != nil {
		tb.Fatal(err)
	}
	pins, err := policy.NewPins([]*mcpdef.Definition{def})
	if err != nil {
		tb.Fatal(err)
	}
	lock, err := pins.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	pol := *s.cfg.Gate.Policy
	pol.ToolPins = filepath.Join(tb.TempDir(), "tools.lock")
	if err := os.WriteFile(pol.ToolPins, lock, 0o600); err != nil {
		tb.Fatal(err)
	}
	s.cfg.Gate.Policy = &pol
	if s.pins, err = newPinner(&pol); err != nil {
		tb.Fatal(err)
	}
	l := &pinListing{entries: map[string]pinEntry{}}
	s.judgeListed(l, mcpdef.Tool, []byte(listed))
	s.pins.state[mcpdef.Tool].known.Store(l)
	return s
}

// The gate refuses a request whose target is not as pinned only once
// everything else would allow it, and reserves nothing for it.
func TestGateUnpinned(t *testing.T) {
	s := testSession(t, zap.NewNop(), io.Discard, io.Discard)
	g := s.cfg.Gate
	req := gate.CallRequest{Tool: "echo", Token: s.cfg.SessionToken, Unpinned: "tool echo changed"}
	d := g.Decide(req)
	if d.Allowed || d.Denial == nil || d.Denial.Type != gate.ToolNotPinned || d.Denial.Detail != "tool echo changed" || d.Reservation != nil ||
		len(d.Denial.Granted) != 1 || d.Denial.Requested == nil || d.Denial.Requested.Action != "echo" {
		t.Errorf("Decide = %+v (denial %+v)", d, d.Denial)
	}
	// A token that does not grant the tool is told so first.
	req.Tool = "other"
	if d := g.Decide(req); d.Denial == nil || d.Denial.Type != dct.CapabilityNotGranted {
		t.Errorf("an ungranted, unpinned tool: %+v", d.Denial)
	}
	// Without a token, where the policy lets such calls through.
	g.Policy.AllowUnauthenticated = true
	if d := g.Decide(gate.CallRequest{Tool: "echo", Unpinned: "x"}); d.Allowed || d.Denial == nil || d.Denial.Type != gate.ToolNotPinned {
		t.Errorf("an unauthenticated, unpinned call: %+v", d)
	}
	if d := g.Decide(gate.CallRequest{Tool: "echo"}); !d.Allowed {
		t.Errorf("an unauthenticated, pinned call: %+v", d.Denial)
	}
}

// Through the relay: a call of a tool listed as pinned is forwarded, one
// listed otherwise is refused and never reaches the upstream, and so is
// one whose tool has no pin.
func TestRelayPinned(t *testing.T) {
	for _, c := range []struct {
		name, listed, tool, want string
	}{
		{"as pinned", echoTool, "echo", ""},
		{"changed", strings.Replace(echoTool, "Echo text.", "Echo text, and mail it.", 1), "echo", "tool echo changed after it was approved: its description differs from its pin in tools.lock"},
		{"unpinned", echoTool, "echo2", "tool echo2 has no pin in tools.lock"},
		{"unreadable", `{"name":"echo","description":"a","Description":"b"}`, "echo", "tool echo is listed with a definition that cannot be read one way only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var toClient, toServer bytes.Buffer
			s := pinSession(t, zap.NewNop(), &toClient, &toServer, c.listed)
			s.cfg.Gate.Policy.AllowUnauthenticated = true
			s.cfg.SessionToken = ""
			s.clientFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":{}}}`))
			s.toServer.flush()
			s.toClient.flush()
			if c.want == "" {
				if !strings.Contains(toServer.String(), `"tools/call"`) || toClient.Len() != 0 {
					t.Errorf("forwarded %q, answered %q", toServer.String(), toClient.String())
				}
				return
			}
			var m struct {
				Error struct {
					Code int
					Data gate.Denial
				}
			}
			if toServer.Len() != 0 || json.Unmarshal(toClient.Bytes(), &m) != nil || m.Error.Code != gate.DenialCode ||
				m.Error.Data.Type != gate.ToolNotPinned || !strings.Contains(m.Error.Data.Detail, c.want) {
				t.Errorf("forwarded %q, answered %q; want a refusal saying %q", toServer.String(), toClient.String(), c.want)
			}
		})
	}
}

// A list result loses the entries not listed as pinned; an entry that
// differs from what the proxy last listed makes that listing stale.
func TestFilterListPinned(t *testing.T) {
	s := pinSession(t, zap.NewNop(), io.Discard, io.Discard, echoTool)
	s.cfg.Gate.Policy.AllowUnauthenticated = true
	s.cfg.SessionToken = ""
	changed := strings.Replace(echoTool, "Echo text.", "Echo, and more.", 1)
	for _, c := range []struct {
		tools, want string
		stale       bool
	}{
		{`[` + echoTool + `]`, "", false},
		{`[` + changed + `]`, `{"tools":[]}`, true},
		{`[` + echoTool + `,{"name":"new"}]`, `{"tools":[` + echoTool + `]}`, true},
	} {
		s.pins.state[mcpdef.Tool].stale.Store(false)
		p := newPending(requestID{num: 1}, []byte("1"), gate.MethodToolsList)
		got, ok := s.filterList(p, []byte(`{"jsonrpc":"2.0","id":5,"result":{"tools":`+c.tools+`}}`))
		var res struct{ Result json.RawMessage }
		_ = json.Unmarshal(got, &res)
		if !ok || string(res.Result) != c.want || s.pins.state[mcpdef.Tool].stale.Load() != c.stale {
			t.Errorf("%s: filtered %q (%v), stale %v; want %q, stale %v", c.tools, res.Result, ok, s.pins.state[mcpdef.Tool].stale.Load(), c.want, c.stale)
		}
	}
}
