//go:build unix

package proxy_test

// End-to-end tests: the real delegateos binary between mcp-go's client and
// the in-repo docserver (examples/docserver), both built by internal/mcptest.
// See its package doc for how a proxy is started and checked; every test
// also checks that the proxy's stdout carried nothing but JSON-RPC frames
// and that it exited as expected.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/mcptest"
)

var notesPath = map[string]any{"path": "/project/sub/notes.md"}

func docsRead(resource string) dct.Capability {
	return dct.Capability{Namespace: "docs", Action: "read", Resource: resource}
}

func mcpCap(tool string) dct.Capability {
	return dct.Capability{Namespace: "mcp", Action: tool, Resource: "*"}
}

func delegationID(tok *dct.Token) string {
	st := tok.Unverified()
	if n := len(st.Attenuations); n > 0 {
		return st.Attenuations[n-1].DelegationID
	}
	return st.Authority.DelegationID
}

// eraName names a subtest by the protocol version it runs: 2025-11-25 if
// legacy, else 2026-07-28.
func eraName(legacy bool) string {
	if legacy {
		return mcp.ProtocolVersion20251125
	}
	return mcp.ProtocolVersion20260728
}

// ---------------------------------------------------------------------------
// 1. tools/list and hidden tools.

func TestE2EToolsListFiltered(t *testing.T) {
	t.Parallel()
	want := []string{"echo", "list_files", "read_file", "search"}
	for _, tt := range []struct {
		name     string
		pageSize int
	}{{"one page", 0}, {"pages of 2", 2}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			tok := e.Mint(nil, "docs:read:/project/**", "mcp:echo:*")
			o := mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}
			if tt.pageSize > 0 {
				o.DocserverArgs = []string{"--page-size", fmt.Sprint(tt.pageSize)}
			}
			s := e.StartProxy(o).Connect(mcptest.SessionOptions{})
			var got []string
			pages := s.ToolPages(t)
			for i, page := range pages {
				if tt.pageSize > 0 && len(page) > tt.pageSize {
					t.Errorf("page %d has %d tools", i+1, len(page))
				}
				for _, tool := range page {
					got = append(got, tool.Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("tools/list through the proxy = %v, want %v", got, want)
			}
			// The docserver has 15 tools with --diagnostics: 8 pages of 2,
			// the last with one.
			if tt.pageSize == 2 && len(pages) != 8 {
				t.Errorf("%d pages, want every one of the upstream's 8", len(pages))
			}
		})
	}
}

func TestE2EHiddenToolDenied(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	granted := mcptest.Caps(t, "docs:read:/project/**", "mcp:echo:*")
	tok := e.Mint(nil, "docs:read:/project/**", "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
	s := p.Connect(mcptest.SessionOptions{})

	r := s.Call(t, "write_file", map[string]any{"path": "/project/planted.md", "content": "x"})
	checkDenial(t, r, denial{typ: dct.CapabilityNotGranted, detail: "tool write_file needs",
		requested: dct.Capability{Namespace: "docs", Action: "write", Resource: "/project/planted.md"}, granted: granted})
	r = s.Call(t, "crash", nil)
	checkDenial(t, r, denial{typ: dct.CapabilityNotGranted, detail: "tool crash needs mcp:crash:*", requested: mcpCap("crash"), granted: granted})

	// Neither call reached the upstream: no file was written, the server is
	// still running, and the only call it logged is the echo below.
	if _, err := os.Stat(filepath.Join(e.Docs, "project", "planted.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the denied write_file ran: %v", err)
	}
	res := s.Call(t, "echo", map[string]any{"text": "still here"}).OK(t, "echo after the denials")
	if got := mcptest.Text(t, res, 0); got != "still here" {
		t.Errorf("echo = %q", got)
	}
	p.WaitLog("upstream stderr", mcptest.UpstreamLogged("tool=echo"))
	if calls := p.LogWith("upstream stderr", mcptest.UpstreamLogged("msg=tools/call")); len(calls) != 1 {
		t.Errorf("the upstream logged %d tool calls, want only the echo: %v", len(calls), calls)
	}
}

// ---------------------------------------------------------------------------
// 2. An allowed call and every denial type.

func TestE2EAllowedCall(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "docs:read:/project/sub/**")
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).Connect(mcptest.SessionOptions{})

	res := s.Call(t, "read_file", notesPath).OK(t, "read_file")
	if got, want := mcptest.Text(t, res, 0), mcptest.Fixture(t, "project/sub/notes.md"); got != want {
		t.Errorf("read_file = %q, want %q", got, want)
	}
	res = s.Call(t, "list_files", map[string]any{"path": "/project/sub"}).OK(t, "list_files")
	if got := mcptest.Text(t, res, 0); got != "notes.md\nplan.md" {
		t.Errorf("list_files = %q", got)
	}
}

func TestE2EDenyCapabilityNotGranted(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "docs:read:/project/sub/**")
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()}).Connect(mcptest.SessionOptions{})
	granted := mcptest.Caps(t, "docs:read:/project/sub/**")

	s.CallAs(t, tok.String(), "read_file", notesPath).OK(t, "read_file in scope")
	for _, path := range []string{"/project/secret.md", "/project/sub/../secret.md", "/project/README.md"} {
		r := s.CallAs(t, tok.String(), "read_file", map[string]any{"path": path})
		checkDenial(t, r, denial{typ: dct.CapabilityNotGranted, detail: "not granted", requested: docsRead(path), granted: granted})
	}
	// A call whose resource argument is missing cannot be mapped: denied.
	r := s.CallAs(t, tok.String(), "read_file", map[string]any{"file": "/project/sub/notes.md"})
	checkDenial(t, r, denial{typ: dct.CapabilityNotGranted, detail: "/path", requested: docsRead(""), granted: granted})
}

func TestE2EDenyExpired(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()}).Connect(mcptest.SessionOptions{})
	now := time.Now()

	t.Run("expired", func(t *testing.T) {
		tok := e.Mint(func(p *dct.CreateParams) {
			p.IssuedAt, p.ExpiresAt = now.Add(-2*time.Hour), now.Add(-time.Hour)
		}, "docs:read:/project/**")
		checkDenial(t, s.CallAs(t, tok.String(), "read_file", notesPath),
			denial{typ: dct.Expired, detail: "expired at", requested: docsRead("/project/sub/notes.md")})
	})
	t.Run("not yet valid", func(t *testing.T) {
		tok := e.Mint(func(p *dct.CreateParams) {
			p.IssuedAt, p.ExpiresAt = now.Add(time.Hour), now.Add(2*time.Hour)
		}, "docs:read:/project/**")
		checkDenial(t, s.CallAs(t, tok.String(), "read_file", notesPath),
			denial{typ: dct.Expired, detail: "not valid yet", requested: docsRead("/project/sub/notes.md")})
	})
	t.Run("expires during the session", func(t *testing.T) {
		// Verified once and cached by the proxy, then refused once its time
		// is up: the expiry is checked on every call.
		expires := time.Now().Add(4 * time.Second).Truncate(time.Millisecond)
		tok := e.Mint(func(p *dct.CreateParams) { p.ExpiresAt = expires }, "docs:read:/project/**")
		s.CallAs(t, tok.String(), "read_file", notesPath).OK(t, "read_file before expiry")
		var r mcptest.Result
		mcptest.Eventually(t, "the token to be refused after it expired", func() bool {
			r = s.CallAs(t, tok.String(), "read_file", notesPath)
			if r.Err != nil && time.Now().Before(expires) {
				t.Fatalf("refused before it expired: %v", r.Err)
			}
			return r.Err != nil
		})
		checkDenial(t, r, denial{typ: dct.Expired, detail: "expired at", requested: docsRead("/project/sub/notes.md")})
	})
}

func TestE2EDenyInvalidSignature(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()}).Connect(mcptest.SessionOptions{})
	mallory := mcptest.NewKey(t, "mallory")
	good := e.Mint(nil, "docs:read:/project/sub/**")
	if mcptest.Serialize(t, good.Unverified()) != good.String() {
		t.Fatal("the harness does not serialize tokens as the dct package does")
	}
	want := func(detail string) denial {
		return denial{typ: dct.InvalidSignature, detail: detail, requested: docsRead("/project/sub/notes.md")}
	}

	t.Run("untrusted root", func(t *testing.T) {
		tok := e.Mint(func(p *dct.CreateParams) { p.Issuer = mallory }, "docs:read:/project/**")
		checkDenial(t, s.CallAs(t, tok.String(), "read_file", notesPath), want("not a trusted root"))
	})
	t.Run("tampered authority", func(t *testing.T) {
		st := good.Unverified()
		st.Authority.Capabilities = mcptest.Caps(t, "docs:read:/**")
		checkDenial(t, s.CallAs(t, mcptest.Serialize(t, st), "read_file", notesPath), want("does not verify"))
	})
	t.Run("attenuation signed by another key", func(t *testing.T) {
		// The attenuation names the agent as its author but mallory signed it.
		st := good.Unverified()
		st.Attenuations = append(st.Attenuations, dct.Attenuation{
			Attenuator: e.Agent.ID(), Delegatee: mallory.ID(), DelegationID: mcptest.NewDelegationID(), ContractID: mcptest.ContractID,
		})
		s1 := mcptest.SignAttenuation(t, &st, 0, mallory)
		s1.Signer = e.Agent.ID()
		st.Signatures = append(st.Signatures, s1)
		checkDenial(t, s.CallAs(t, mcptest.Serialize(t, st), "read_file", notesPath), want("does not verify"))
	})
	s.CallAs(t, good.String(), "read_file", notesPath).OK(t, "the untampered token")
}

func TestE2EDenyAttenuationViolation(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()}).Connect(mcptest.SessionOptions{})
	mallory := mcptest.NewKey(t, "mallory")
	parent := e.Mint(nil, "docs:read:/project/sub/**")
	want := func(detail string) denial {
		return denial{typ: dct.AttenuationViolation, detail: detail, requested: docsRead("/project/sub/notes.md")}
	}

	t.Run("signed by a key that does not hold the token", func(t *testing.T) {
		// Mallory never held the token but signs an attenuation to herself:
		// her signature is genuine, her authority is not.
		st := parent.Unverified()
		st.Attenuations = append(st.Attenuations, dct.Attenuation{
			Attenuator: mallory.ID(), Delegatee: mallory.ID(), DelegationID: mcptest.NewDelegationID(), ContractID: mcptest.ContractID,
		})
		st.Signatures = append(st.Signatures, mcptest.SignAttenuation(t, &st, 0, mallory))
		checkDenial(t, s.CallAs(t, mcptest.Serialize(t, st), "read_file", notesPath), want("attenuator mismatch"))
	})
	t.Run("widening", func(t *testing.T) {
		// The agent, who holds docs:read:/project/sub/**, signs a grant of
		// docs:read:/project/** to mallory.
		wider := mcptest.Caps(t, "docs:read:/project/**")
		st := parent.Unverified()
		st.Attenuations = append(st.Attenuations, dct.Attenuation{
			Attenuator: e.Agent.ID(), Delegatee: mallory.ID(), DelegationID: mcptest.NewDelegationID(), ContractID: mcptest.ContractID,
			AllowedCapabilities: &wider,
		})
		st.Signatures = append(st.Signatures, mcptest.SignAttenuation(t, &st, 0, e.Agent))
		checkDenial(t, s.CallAs(t, mcptest.Serialize(t, st), "read_file", notesPath), want("capability expansion"))
	})
	t.Run("budget raised", func(t *testing.T) {
		more := int64(2_000_000)
		st := parent.Unverified()
		st.Attenuations = append(st.Attenuations, dct.Attenuation{
			Attenuator: e.Agent.ID(), Delegatee: mallory.ID(), DelegationID: mcptest.NewDelegationID(), ContractID: mcptest.ContractID,
			MaxBudgetMicrocents: &more,
		})
		st.Signatures = append(st.Signatures, mcptest.SignAttenuation(t, &st, 0, e.Agent))
		checkDenial(t, s.CallAs(t, mcptest.Serialize(t, st), "read_file", notesPath), want("budget expansion"))
	})
	// The same attenuation made properly is accepted.
	child := mcptest.Attenuate(t, parent, e.Agent, mallory, 500_000)
	s.CallAs(t, child.String(), "read_file", notesPath).OK(t, "a proper attenuation")
}

func TestE2EDenyRevoked(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	revs := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, revs, "[]\n")
	pol := e.Policy()
	pol.RevocationList = revs
	tok := e.Mint(nil, "docs:read:/project/**")
	other := e.Mint(nil, "docs:read:/project/**")
	s := e.StartProxy(mcptest.ProxyOptions{Policy: pol}).Connect(mcptest.SessionOptions{})

	s.CallAs(t, tok.String(), "read_file", notesPath).OK(t, "read_file before the revocation")
	tokFile := filepath.Join(e.Dir, "revoked.tok")
	mcptest.WriteFile(t, tokFile, tok.String())
	if out, errOut, code := mcptest.CLI(t, "revoke", "--key", e.KeyFile(e.Root), "--token", "@"+tokFile, "--block", "0", "--list", revs); code != 0 {
		t.Fatalf("delegateos revoke: status %d\n%s%s", code, out, errOut)
	}
	// The proxy looks at the list file on every call (revocation.File):
	// the first call after delegateos revoke returned is denied, however
	// loaded the machine (it was a poll with a one-second bound).
	r := s.CallAs(t, tok.String(), "read_file", notesPath)
	if r.Err == nil {
		t.Fatal("the first call after delegateos revoke returned was allowed")
	}
	checkDenial(t, r, denial{typ: dct.Revoked, detail: "revoked", requested: docsRead("/project/sub/notes.md")})
	s.CallAs(t, other.String(), "read_file", notesPath).OK(t, "another token of the same root")
}

func TestE2EDenyBudgetExceeded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		budget int64
		detail string
	}{
		{"the next call does not fit", 250, "this call costs 100 microcents; delegation"},
		{"the budget is spent", 200, "spent 200 of a budget of 200"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			tok := e.Mint(mcptest.Budget(tt.budget), "mcp:echo:*")
			s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 100)), Token: tok}).Connect(mcptest.SessionOptions{})
			for i := range 2 {
				s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, fmt.Sprintf("echo %d", i+1))
			}
			for range 2 {
				checkDenial(t, s.Call(t, "echo", map[string]any{"text": "x"}),
					denial{typ: dct.BudgetExceeded, detail: tt.detail, requested: mcpCap("echo"), granted: mcptest.Caps(t, "mcp:echo:*")})
			}
		})
	}
}

func TestE2EDenyMalformedToken(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()}).Connect(mcptest.SessionOptions{})
	req := docsRead("/project/sub/notes.md")
	for _, tt := range []struct{ name, token, detail string }{
		{"garbage", "this is not a token!", "base64url"},
		{"not JSON", b64.Encode([]byte("hello")), "token JSON"},
		{"wrong shape", b64.Encode([]byte(`{"format":"delegateos-sjt-v1"}`)), ""},
		{"empty", "", "no DCT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkDenial(t, s.CallAs(t, tt.token, "read_file", notesPath), denial{typ: dct.Malformed, detail: tt.detail, requested: req})
		})
	}
	t.Run("_delegateos not an object", func(t *testing.T) {
		r := s.CallExtra(mcptest.Context(t), mcptest.CallRequest("read_file", notesPath), map[string]any{"_delegateos": "a token"})
		checkDenial(t, r, denial{typ: dct.Malformed, detail: "_delegateos", requested: req})
	})
	t.Run("unknown format", func(t *testing.T) {
		good := e.Mint(nil, "docs:read:/project/**")
		r := s.CallExtra(mcptest.Context(t), mcptest.CallRequest("read_file", notesPath),
			map[string]any{"_delegateos": map[string]any{"dct": good.String(), "format": "biscuit-v2"}})
		checkDenial(t, r, denial{typ: dct.Malformed, detail: "biscuit-v2", requested: req})
	})
}

func TestE2ENoToken(t *testing.T) {
	t.Parallel()
	t.Run("refused by default", func(t *testing.T) {
		t.Parallel()
		e := mcptest.NewEnv(t)
		p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()})
		s := p.Connect(mcptest.SessionOptions{})
		list, err := s.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
		if err != nil || len(list.Tools) != 0 {
			t.Errorf("tools/list without a token = %v, %v; want no tools", list, err)
		}
		checkDenial(t, s.Call(t, "echo", map[string]any{"text": "x"}), denial{typ: dct.Malformed, detail: "no DCT", requested: mcpCap("echo")})
	})
	t.Run("allow_unauthenticated", func(t *testing.T) {
		t.Parallel()
		e := mcptest.NewEnv(t)
		pol := e.Policy()
		pol.AllowUnauthenticated = true
		s := e.StartProxy(mcptest.ProxyOptions{Policy: pol}).Connect(mcptest.SessionOptions{})
		list, err := s.ListTools(mcptest.Context(t), mcp.ListToolsRequest{})
		if err != nil || len(list.Tools) != 15 {
			t.Errorf("tools/list without a token shows %d tools (%v); want all 15", len(list.Tools), err)
		}
		res := s.Call(t, "echo", map[string]any{"text": "anyone"}).OK(t, "echo without a token")
		if got := mcptest.Text(t, res, 0); got != "anyone" {
			t.Errorf("echo = %q", got)
		}
		// A token that is presented is still checked.
		checkDenial(t, s.CallAs(t, "garbage", "echo", map[string]any{"text": "x"}),
			denial{typ: dct.Malformed, detail: "base64url", requested: mcpCap("echo")})
	})
}

// TestE2EGateCannotBeBypassed sends tools/call frames that the proxy and
// the upstream's JSON decoder (Go's encoding/json, as in most Go MCP
// servers: member names matched case-insensitively, escapes decoded, a
// "result" of null read as absent) could read differently. The token
// grants only echo and docs:read on /project/sub/**: each frame must be
// refused, and none may write a file or read secret.md.
func TestE2EGateCannotBeBypassed(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*", "docs:read:/project/sub/**")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
	c := p.Raw()
	c.Initialize()
	write := func(n int) string {
		return fmt.Sprintf(`{"name":"write_file","arguments":{"path":"/project/pwned%d.md","content":"pwned"}}`, n)
	}
	for i, frame := range []string{
		`{"jsonrpc":"2.0","id":1,"result":null,"method":"tools/call","params":` + write(1) + `}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping","METHOD":"tools/call","params":` + write(2) + `}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping","m\u0065thod":"tools/call","params":` + write(3) + `}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","NAME":"write_file","arguments":{"text":"x","path":"/project/pwned4.md","content":"pwned"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}},"PARAMS":` + write(5) + `}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","n\u0061me":"write_file","arguments":{"text":"x","path":"/project/pwned6.md","content":"pwned"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/project/sub/notes.md"},"Arguments":{"path":"/project/secret.md"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}},"id":9}`,
		// A server that binds arguments to a struct reads the last of these.
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/project/sub/notes.md","PATH":"/project/secret.md"}}}`,
	} {
		id := fmt.Sprint(i + 1)
		c.Send(frame)
		m := c.Response(id)
		if m.Error == nil {
			t.Errorf("frame %s was answered with a result %s", id, mcptest.Clip(m.Result))
		} else if m.Error.Code != -32600 {
			t.Errorf("frame %s was answered %d %s; want -32600", id, m.Error.Code, m.Error.Message)
		}
	}
	c.Send(mcptest.CallFrame("10", "echo", map[string]any{"text": "done"}))
	if got := mcptest.ResultText(t, c.Response("10")); got != "done" {
		t.Errorf("echo = %q", got)
	}
	if pwned, _ := filepath.Glob(filepath.Join(e.Docs, "project", "pwned*")); len(pwned) > 0 {
		t.Errorf("denied writes reached the upstream: %v", pwned)
	}
	p.WaitLog("upstream stderr", mcptest.UpstreamLogged("tool=echo"))
	for _, m := range p.LogWith("upstream stderr", mcptest.UpstreamLogged("msg=tools/call")) {
		if line := m["line"].(string); !strings.Contains(line, "tool=echo") {
			t.Errorf("the upstream ran a call the token does not allow: %s", line)
		}
	}
}

// ---------------------------------------------------------------------------
// 3. _delegateos never reaches the upstream.

func TestE2EDelegateosNeverReachesUpstream(t *testing.T) {
	t.Parallel()
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			tok := e.Mint(nil, "mcp:echo:*")
			p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()})
			s := p.Connect(mcptest.SessionOptions{Legacy: legacy})
			full := map[string]any{"dct": tok.String(), "format": dct.Format, "delegationId": delegationID(tok), "contractId": mcptest.ContractID}

			seen := func(extra map[string]any) {
				t.Helper()
				res := s.CallExtra(mcptest.Context(t), mcptest.CallRequest("echo", map[string]any{"text": "hello", "n": 1}), extra).OK(t, "echo")
				if got := mcptest.Text(t, res, 0); got != "hello" {
					t.Errorf("echo text = %q", got)
				}
				var echoed struct {
					Arguments map[string]any             `json:"arguments"`
					Params    map[string]json.RawMessage `json:"params"`
				}
				if err := json.Unmarshal([]byte(mcptest.Text(t, res, 1)), &echoed); err != nil {
					t.Fatal(err)
				}
				if mcptest.MustJSON(echoed.Arguments) != `{"n":1,"text":"hello"}` {
					t.Errorf("the upstream received arguments %v", echoed.Arguments)
				}
				if string(echoed.Params["name"]) != `"echo"` {
					t.Errorf("the upstream received params %v", echoed.Params)
				}
				for k := range echoed.Params {
					if strings.EqualFold(k, "_delegateos") {
						t.Errorf("the upstream received params.%s: %s", k, echoed.Params[k])
					}
				}
			}
			seen(map[string]any{"_delegateos": full})
			seen(map[string]any{"_delegateos": map[string]any{"dct": tok.String()}})
			// A second _delegateos in other letter case is refused, not
			// passed on.
			r := s.CallExtra(mcptest.Context(t), mcptest.CallRequest("echo", map[string]any{"text": "x"}),
				map[string]any{"_delegateos": map[string]any{"dct": tok.String()}, "_DelegateOS": map[string]any{"x": 1}})
			if r.RPC == nil || r.RPC.Code != -32600 {
				t.Errorf("a call with _delegateos and _DelegateOS got %v (%+v); want -32600", r.Err, r.RPC)
			}

			granted := mcptest.Caps(t, "mcp:echo:*")
			wrongContract := map[string]any{"dct": tok.String(), "contractId": "ct_someoneelse"}
			checkDenial(t, s.CallExtra(mcptest.Context(t), mcptest.CallRequest("echo", map[string]any{"text": "x"}), map[string]any{"_delegateos": wrongContract}),
				denial{typ: dct.CapabilityNotGranted, detail: "contract ct_someoneelse", requested: mcpCap("echo"), granted: granted})
			wrongDelegation := map[string]any{"dct": tok.String(), "delegationId": "del_someoneelse"}
			checkDenial(t, s.CallExtra(mcptest.Context(t), mcptest.CallRequest("echo", map[string]any{"text": "x"}), map[string]any{"_delegateos": wrongDelegation}),
				denial{typ: dct.CapabilityNotGranted, detail: "delegation del_someoneelse", requested: mcpCap("echo"), granted: granted})

			// The denied calls never reached the upstream: it logged only the
			// allowed ones.
			seen(map[string]any{"_delegateos": full})
			mcptest.Eventually(t, "the upstream to log 3 echo calls", func() bool {
				return len(p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=echo"))) >= 3
			})
			if n := len(p.LogWith("upstream stderr", mcptest.UpstreamLogged("tool=echo"))); n != 3 {
				t.Errorf("the upstream ran echo %d times, want the 3 allowed calls only", n)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 4. Progress, cancellation, requests from the server, list_changed.

func TestE2EProgressCrosses(t *testing.T) {
	t.Parallel()
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			tok := e.Mint(nil, "mcp:slow:*")
			s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).Connect(mcptest.SessionOptions{Legacy: legacy})
			req := mcptest.CallRequest("slow", map[string]any{"steps": 3, "delay_ms": 10})
			req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
			res := s.CallExtra(mcptest.Context(t), req, nil).OK(t, "slow")
			if got := mcptest.Text(t, res, 0); got != "done 3" {
				t.Errorf("slow = %q", got)
			}
			mcptest.Eventually(t, "3 progress notifications", func() bool {
				return len(s.Notifications("notifications/progress")) == 3
			})
			for i, n := range s.Notifications("notifications/progress") {
				f := n.Params.AdditionalFields
				if f["progressToken"] != "tok-1" || f["progress"] != float64(i+1) || f["total"] != 3.0 {
					t.Errorf("progress %d = %v", i, f)
				}
			}
		})
	}
}

func TestE2ECancellationCrosses(t *testing.T) {
	t.Parallel()
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			tok := e.Mint(mcptest.Budget(1000), "mcp:slow:*", "mcp:echo:*")
			p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("slow", 100)), Token: tok})
			s := p.Connect(mcptest.SessionOptions{Legacy: legacy})

			ctx, cancel := context.WithCancel(mcptest.Context(t))
			defer cancel()
			req := mcptest.CallRequest("slow", map[string]any{"steps": 1000, "delay_ms": 20})
			req.Params.Meta = &mcp.Meta{ProgressToken: 42}
			done := make(chan mcptest.Result, 1)
			go func() { done <- s.CallExtra(ctx, req, nil) }()
			mcptest.Eventually(t, "the first progress notification", func() bool {
				return len(s.Notifications("notifications/progress")) > 0
			})
			cancel()
			if r := <-done; !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("the cancelled call returned %v", r.Err)
			}
			// notifications/cancelled reached the upstream, which stopped.
			p.WaitLog("upstream stderr", mcptest.UpstreamLogged("slow: cancelled"))
			// The proxy settled the cancelled call, charged (the upstream
			// may have done the work), rather than holding its cost.
			settled := p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "slow" && m["allowed"] == true })
			if settled["cost"] != 100.0 || settled["released"] == true || settled["outcome"] != "cancelled" {
				t.Errorf("the cancelled call was settled as %v; want charged its cost of 100", settled)
			}
			res := s.Call(t, "echo", map[string]any{"text": "after"}).OK(t, "echo after the cancellation")
			if got := mcptest.Text(t, res, 0); got != "after" {
				t.Errorf("echo = %q", got)
			}
		})
	}
}

// TestE2EServerRequestsCross pins 2025-11-25, where the server sends
// sampling/createMessage, roots/list and elicitation/create to the client
// as requests, which the proxy relays both ways.
func TestE2EServerRequestsCross(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:sample:*", "mcp:roots:*", "mcp:elicit:*")
	sampler := &mcptest.Sampler{}
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).
		Connect(mcptest.SessionOptions{Legacy: true, ClientOptions: mcptest.Handlers(sampler)})

	t.Run("sampling", func(t *testing.T) {
		res := s.Call(t, "sample", map[string]any{"prompt": "what is 6×7?"}).OK(t, "sample")
		if got := mcptest.Text(t, res, 0); got != "answer to: what is 6×7?" {
			t.Errorf("sample = %q", got)
		}
		if !slices.Equal(sampler.Seen(), []string{"what is 6×7?"}) {
			t.Errorf("the client's sampling handler saw %q", sampler.Seen())
		}
	})
	t.Run("roots", func(t *testing.T) {
		res := s.Call(t, "roots", nil).OK(t, "roots")
		if got := mcptest.Text(t, res, 0); got != `{"roots":[{"uri":"file:///work/project","name":"project"}]}` {
			t.Errorf("roots = %q", got)
		}
	})
	t.Run("elicitation", func(t *testing.T) {
		res := s.Call(t, "elicit", map[string]any{"message": "proceed?"}).OK(t, "elicit")
		if got := mcptest.Text(t, res, 0); got != `{"action":"accept","content":{"answer":"yes to proceed?"}}` {
			t.Errorf("elicit = %q", got)
		}
	})
	want := []string{"sampling/createMessage", "roots/list", "elicitation/create"}
	if got := s.Wire.IncomingMethods(); !slices.Equal(got, want) {
		t.Errorf("requests from the server that reached the client: %v, want %v", got, want)
	}
}

// TestE2EInputRequired uses 2026-07-28, where a tool that needs the
// client's input answers input_required and the client calls it again with
// the input; only the final call is charged.
func TestE2EInputRequired(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(mcptest.Budget(200), "mcp:sample:*", "mcp:roots:*", "mcp:echo:*")
	sampler := &mcptest.Sampler{}
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("sample", 100), mcptest.Priced("echo", 100)), Token: tok})
	s := p.Connect(mcptest.SessionOptions{ClientOptions: mcptest.Handlers(sampler)})

	r := s.Call(t, "sample", map[string]any{"prompt": "hi"})
	if got := mcptest.Text(t, r.OK(t, "sample"), 0); got != "answer to: hi" {
		t.Errorf("sample = %q", got)
	}
	if r.Frames != 2 {
		t.Errorf("sample took %d tools/call frames, want 2 (input_required, then the retry)", r.Frames)
	}
	res := s.Call(t, "roots", nil).OK(t, "roots")
	if got := mcptest.Text(t, res, 0); got != `{"roots":[{"uri":"file:///work/project","name":"project"}]}` {
		t.Errorf("roots = %q", got)
	}
	if got := s.Wire.IncomingMethods(); len(got) != 0 {
		t.Errorf("on 2026-07-28 the server sent requests %v to the client", got)
	}
	// Budget 200, sample and echo cost 100 each: if the input_required
	// round had been charged, the budget would be spent already.
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "echo within the budget")
	checkDenial(t, s.Call(t, "echo", map[string]any{"text": "x"}),
		denial{typ: dct.BudgetExceeded, detail: "spent 200 of a budget of 200", requested: mcpCap("echo"), granted: mcptest.Caps(t, "mcp:sample:*", "mcp:roots:*", "mcp:echo:*")})
	// The log is flushed asynchronously: wait for both settlements.
	isSample := func(m map[string]any) bool { return m["tool"] == "sample" && m["allowed"] == true }
	for deadline := time.Now().Add(10 * time.Second); len(p.LogWith("decision", isSample)) < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	var released, charged int
	for _, m := range p.LogWith("decision", isSample) {
		if m["released"] == true && m["cost"] == 0.0 && m["outcome"] == "input required" {
			released++
		} else if m["cost"] == 100.0 {
			charged++
		}
	}
	if released != 1 || charged != 1 {
		t.Errorf("sample settled %d times released and %d times charged; want once each", released, charged)
	}
}

func TestE2EListChangedCrosses(t *testing.T) {
	t.Parallel()
	for _, legacy := range []bool{false, true} {
		t.Run(eraName(legacy), func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			tok := e.Mint(nil, "mcp:notify_list_changed:*")
			s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).Connect(mcptest.SessionOptions{Legacy: legacy})
			s.Call(t, "notify_list_changed", nil).OK(t, "notify_list_changed")
			mcptest.Eventually(t, "notifications/tools/list_changed", func() bool {
				return len(s.Notifications(mcp.MethodNotificationToolsListChanged)) > 0
			})
		})
	}
}

// ---------------------------------------------------------------------------
// 5. Frame sizes and garbage.

// bigText is what the docserver's big tool returns.
func bigText(n int) string {
	const pattern = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
	var b strings.Builder
	b.Grow(n)
	for b.Len()+len(pattern) <= n {
		b.WriteString(pattern)
	}
	b.WriteString(pattern[:n-b.Len()])
	return b.String()
}

func TestE2EBigResult(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:big:*")
	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).Connect(mcptest.SessionOptions{})
	const size = 5 << 20
	// Five megabytes through race-instrumented code on both sides take a
	// few seconds, and many more on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	res := s.CallExtra(ctx, mcptest.CallRequest("big", map[string]any{"bytes": size}), nil).OK(t, "big")
	if got := mcptest.Text(t, res, 0); got != bigText(size) {
		t.Errorf("big returned %d bytes, not the %d the upstream sent", len(got), size)
	}
}

func TestE2EOversizeClientFrame(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.MaxFrameBytes = 1 << 20
	p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	c := p.Raw()
	c.Initialize()

	huge := strings.Repeat("a", 1<<20+4096)
	c.Send(mcptest.CallFrame("2", "echo", map[string]any{"text": huge}))
	m := c.Response("2")
	if m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "frame limit of 1048576") {
		t.Errorf("an oversize request was answered %+v; want -32600 naming the limit", m.Error)
	}
	// An oversize notification gets no answer: the next frame is the
	// response to the request after it.
	c.Send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + huge + `"}}`)
	c.Send(mcptest.CallFrame("3", "echo", map[string]any{"text": "small"}))
	if got := mcptest.ResultText(t, c.Response("3")); got != "small" {
		t.Errorf("echo after the oversize frames = %q", got)
	}
	if calls := p.LogWith("upstream stderr", mcptest.UpstreamLogged("msg=tools/call")); len(calls) > 1 {
		t.Errorf("the oversize request reached the upstream: %v", calls)
	}
}

func TestE2EOversizeUpstreamResponse(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:big:*", "mcp:echo:*")
	pol := e.Policy()
	pol.MaxFrameBytes = 1 << 20
	s := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok}).Connect(mcptest.SessionOptions{})

	r := s.Call(t, "big", map[string]any{"bytes": 2 << 20})
	if r.RPC == nil || r.RPC.Code != -32603 || !strings.Contains(r.RPC.Message, "frame limit") {
		t.Fatalf("a 2 MiB response under a 1 MiB limit gave %v (%+v); want a -32603 error naming the limit", r.Err, r.RPC)
	}
	res := s.Call(t, "echo", map[string]any{"text": "still here"}).OK(t, "echo after the oversize response")
	if got := mcptest.Text(t, res, 0); got != "still here" {
		t.Errorf("echo = %q", got)
	}
	res = s.Call(t, "big", map[string]any{"bytes": 512 << 10}).OK(t, "big under the limit")
	if got := mcptest.Text(t, res, 0); got != bigText(512<<10) {
		t.Errorf("big returned %d bytes", len(got))
	}
}

// bigSampler answers sampling requests with more text than the frame limit.
type bigSampler struct{ size int }

func (b bigSampler) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent(bigText(b.size))},
		Model:           "test-model",
	}, nil
}

// TestE2EOversizeClientAnswer: the client's answer to a request from the
// server is over the limit. The server's request must fail (it would
// otherwise wait forever), so the tool call that needed it ends, and the
// session goes on.
func TestE2EOversizeClientAnswer(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:sample:*", "mcp:echo:*")
	pol := e.Policy()
	pol.MaxFrameBytes = 1 << 20
	s := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok}).Connect(mcptest.SessionOptions{Legacy: true,
		ClientOptions: []client.ClientOption{client.WithSamplingHandler(bigSampler{size: 2 << 20})}})

	ctx, cancel := context.WithTimeout(mcptest.Context(t), 60*time.Second)
	defer cancel()
	r := s.CallExtra(ctx, mcptest.CallRequest("sample", map[string]any{"prompt": "write a lot"}), nil)
	if errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatal("the sample call hung: the upstream never learnt that the client's answer was dropped")
	}
	if r.Err == nil && !r.Res.IsError {
		t.Errorf("the sample call succeeded with an answer over the frame limit: %d bytes", len(mcptest.Text(t, r.Res, 0)))
	}
	res := s.Call(t, "echo", map[string]any{"text": "still here"}).OK(t, "echo after the oversize answer")
	if got := mcptest.Text(t, res, 0); got != "still here" {
		t.Errorf("echo = %q", got)
	}
}

func TestE2EUnparsableLine(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	c := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).Raw()
	c.Initialize()
	for _, tt := range []struct {
		line string
		code int
	}{
		{"this is not json", -32700},
		{`{"jsonrpc":"2.0","id":5,"method":`, -32700},
		{"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"x\":\"\xff\x00\"}", -32700},
		// JSON, but not a JSON-RPC message: an invalid request.
		{`[1,2,3]`, -32600},
		{`{}`, -32600},
	} {
		c.Send(tt.line)
		m := c.Response("null")
		if m.Error == nil || m.Error.Code != tt.code {
			t.Errorf("%q was answered %+v; want %d", tt.line, m.Error, tt.code)
		}
	}
	// JSON-RPC of the wrong shape whose id can be read is answered with it.
	c.Send(`{"jsonrpc":"2.0","id":5,"method":"ping","result":{}}`)
	if m := c.Response("5"); m.Error == nil || m.Error.Code != -32600 {
		t.Errorf("a request with a result was answered %+v; want -32600", m.Error)
	}
	c.Send(mcptest.CallFrame("6", "echo", map[string]any{"text": "after"}))
	if got := mcptest.ResultText(t, c.Response("6")); got != "after" {
		t.Errorf("echo after the garbage = %q", got)
	}
}

// ---------------------------------------------------------------------------
// 6. The upstream crashing.

func TestE2EUpstreamCrash(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:crash:*", "mcp:slow:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok, WantExit: func(code int) bool { return code == 1 }})
	s := p.Connect(mcptest.SessionOptions{})

	slow := make(chan mcptest.Result, 1)
	req := mcptest.CallRequest("slow", map[string]any{"steps": 1000, "delay_ms": 20})
	req.Params.Meta = &mcp.Meta{ProgressToken: "bg"}
	go func() { slow <- s.CallExtra(mcptest.Context(t), req, nil) }()
	mcptest.Eventually(t, "the slow call to start", func() bool {
		return len(s.Notifications("notifications/progress")) > 0
	})
	r := s.Call(t, "crash", nil)
	if r.RPC == nil || r.RPC.Code != -32603 || !strings.Contains(r.RPC.Message, "exited") {
		t.Errorf("the call the upstream crashed in got %v (%+v); want a -32603 error saying the upstream exited", r.Err, r.RPC)
	}
	if r := <-slow; r.RPC == nil || r.RPC.Code != -32603 {
		t.Errorf("the call in flight when the upstream crashed got %v (%+v); want a -32603 error", r.Err, r.RPC)
	}
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("the proxy is still running after its upstream exited")
	}
	if got := p.Stderr.String(); !strings.Contains(got, "upstream MCP server exited") || !strings.Contains(got, "exit status 3") {
		t.Errorf("the proxy's stderr does not say the upstream exited with status 3:\n%s", got)
	}
}

// ---------------------------------------------------------------------------
// 7. Concurrency and budgets.

// parallelCalls makes n calls at once and counts the successes and the
// budget_exceeded denials; anything else fails the test.
func parallelCalls(t *testing.T, s *mcptest.Session, n int, token func(i int) string) (succeeded, refused int) {
	t.Helper()
	results := make([]mcptest.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			extra := map[string]any(nil)
			if token != nil {
				extra = mcptest.TokenParams(token(i))
			}
			results[i] = s.CallExtra(mcptest.Context(t), mcptest.CallRequest("echo", map[string]any{"text": fmt.Sprint(i)}), extra)
		})
	}
	wg.Wait()
	for i, r := range results {
		switch {
		case r.Err == nil && !r.Res.IsError:
			succeeded++
		case isDenial(r, dct.BudgetExceeded):
			refused++
		default:
			t.Errorf("call %d: %v %+v", i, r.Err, r.RPC)
		}
	}
	return succeeded, refused
}

func TestE2EParallelCallsBudget(t *testing.T) {
	t.Parallel()
	t.Run("one level", func(t *testing.T) {
		t.Parallel()
		e := mcptest.NewEnv(t)
		tok := e.Mint(mcptest.Budget(4000), "mcp:echo:*")
		s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 100)), Token: tok}).Connect(mcptest.SessionOptions{})
		if ok, refused := parallelCalls(t, s, 100, nil); ok != 40 || refused != 60 {
			t.Errorf("%d calls succeeded and %d were refused; want exactly 40 and 60", ok, refused)
		}
	})
	t.Run("the parent's budget binds", func(t *testing.T) {
		t.Parallel()
		e := mcptest.NewEnv(t)
		bob := mcptest.NewKey(t, "bob")
		parent := e.Mint(mcptest.Budget(4000), "mcp:echo:*")
		child := mcptest.Attenuate(t, parent, e.Agent, bob, 3000)
		s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 100))}).Connect(mcptest.SessionOptions{})
		for i := range 20 {
			s.CallAs(t, parent.String(), "echo", map[string]any{"text": "parent"}).OK(t, fmt.Sprintf("parent call %d", i))
		}
		// The child may spend 3000, but its parent has only 2000 left.
		if ok, refused := parallelCalls(t, s, 100, func(int) string { return child.String() }); ok != 20 || refused != 80 {
			t.Errorf("%d child calls succeeded and %d were refused; want exactly 20 and 80", ok, refused)
		}
	})
	t.Run("siblings share the parent's budget", func(t *testing.T) {
		t.Parallel()
		e := mcptest.NewEnv(t)
		parent := e.Mint(mcptest.Budget(4000), "mcp:echo:*")
		a := mcptest.Attenuate(t, parent, e.Agent, mcptest.NewKey(t, "a"), 3000)
		b := mcptest.Attenuate(t, parent, e.Agent, mcptest.NewKey(t, "b"), 3000)
		s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 100))}).Connect(mcptest.SessionOptions{})
		byIndex := func(i int) string {
			if i%2 == 0 {
				return a.String()
			}
			return b.String()
		}
		if ok, refused := parallelCalls(t, s, 100, byIndex); ok != 40 || refused != 60 {
			t.Errorf("%d calls succeeded and %d were refused; want exactly 40 and 60", ok, refused)
		}
	})
}

// ---------------------------------------------------------------------------
// 8 and 9. Spend that survives a restart; costs the upstream reports.

func TestE2ESpendSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	pol := e.Policy(mcptest.Priced("echo", 100))
	pol.SpendStore = filepath.Join(e.Dir, "spend.log")
	tok := e.Mint(mcptest.Budget(1000), "mcp:echo:*")

	p1 := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
	s1 := p1.Connect(mcptest.SessionOptions{})
	for i := range 3 {
		s1.Call(t, "echo", map[string]any{"text": "x"}).OK(t, fmt.Sprintf("first run, echo %d", i+1))
	}
	s1.Close()
	if !p1.WaitExit(10*time.Second) || p1.ExitCode() != 0 {
		t.Fatalf("the first proxy did not exit cleanly: %v", p1.WaitErr())
	}

	s2 := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok}).Connect(mcptest.SessionOptions{})
	for i := range 7 {
		s2.Call(t, "echo", map[string]any{"text": "x"}).OK(t, fmt.Sprintf("second run, echo %d", i+1))
	}
	checkDenial(t, s2.Call(t, "echo", map[string]any{"text": "x"}),
		denial{typ: dct.BudgetExceeded, detail: "spent 1000 of a budget of 1000", requested: mcpCap("echo"), granted: mcptest.Caps(t, "mcp:echo:*")})
}

func TestE2EHonourUpstreamCost(t *testing.T) {
	t.Parallel()
	for _, honour := range []bool{false, true} {
		t.Run(fmt.Sprintf("honour_upstream_cost=%v", honour), func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			pol := e.Policy(mcptest.Priced("costly", 100))
			pol.HonourUpstreamCost = honour
			tok := e.Mint(mcptest.Budget(1000), "mcp:costly:*")
			p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, Token: tok})
			s := p.Connect(mcptest.SessionOptions{})

			// A reported cost is capped at what was reserved: the rule
			// sets no max_cost, so 100.
			s.Call(t, "costly", map[string]any{"cost": 950}).OK(t, "costly reporting 950")
			settled := p.WaitLog("decision", func(m map[string]any) bool { return m["tool"] == "costly" && m["allowed"] == true })
			if settled["cost"] != 100.0 {
				t.Errorf("the call was charged %v, want 100", settled["cost"])
			}
			s.Call(t, "costly", map[string]any{"cost": 0}).OK(t, "a second costly call: only 100 of 1000 is spent")
		})
	}
}

// ---------------------------------------------------------------------------
// 10. Lifecycle and stdout.

func TestE2EClientEOF(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "echo")
	pid := p.UpstreamPID()
	if mcptest.ProcessGone(pid) {
		t.Fatalf("upstream pid %d from the log does not exist", pid)
	}
	s.Close() // closes the proxy's stdin
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("the proxy did not exit after its stdin closed")
	}
	if code := p.ExitCode(); code != 0 {
		t.Errorf("the proxy exited with status %d after a clean EOF, want 0", code)
	}
	if !mcptest.ProcessGone(pid) {
		t.Errorf("the upstream (pid %d) outlived the proxy", pid)
	}
	p.WaitLog("upstream exited after the client closed", nil)
}

func TestE2ESIGTERMPassedOn(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*", "mcp:slow:*")
	// The proxy exits by itself (not killed by the signal), reporting that
	// its upstream exited.
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok, WantExit: func(code int) bool { return code >= 0 }})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "echo")
	pid := p.UpstreamPID()

	slow := make(chan mcptest.Result, 1)
	req := mcptest.CallRequest("slow", map[string]any{"steps": 1000, "delay_ms": 20})
	req.Params.Meta = &mcp.Meta{ProgressToken: "bg"}
	go func() { slow <- s.CallExtra(mcptest.Context(t), req, nil) }()
	mcptest.Eventually(t, "the slow call to start", func() bool {
		return len(s.Notifications("notifications/progress")) > 0
	})

	// Only the proxy is signalled; its stdin stays open. The upstream can
	// only learn of the signal from the proxy.
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("the proxy did not exit after SIGTERM")
	}
	if !mcptest.ProcessGone(pid) {
		t.Errorf("the upstream (pid %d) outlived the proxy", pid)
	}
	if got := p.LogWith("passing signal to the upstream", func(m map[string]any) bool { return m["signal"] == "terminated" }); len(got) != 1 {
		t.Errorf("the log shows %d SIGTERMs passed on, want 1", len(got))
	}
	if r := <-slow; r.Err == nil {
		t.Errorf("the call in flight at SIGTERM succeeded: %+v", r.Res)
	}
}

// TestE2EStdoutCarriesOnlyFrames logs to stderr (no --log) while the
// upstream writes a line to its stderr for every call: every byte on the
// proxy's stdout must still be a JSON-RPC frame, exactly one per answer.
func TestE2EStdoutCarriesOnlyFrames(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok, LogToStderr: true})
	c := p.Raw()
	c.Initialize()
	for i := range 3 {
		id := fmt.Sprint(10 + i)
		c.Send(mcptest.CallFrame(id, "echo", map[string]any{"text": "line " + id}))
		mcptest.ResultText(t, c.Response(id))
	}
	c.Send(mcptest.CallFrame("20", "read_file", notesPath)) // denied
	if m := c.Response("20"); m.Error == nil || m.Error.Code != -32001 {
		t.Errorf("read_file without a grant: %+v", m.Error)
	}
	c.Send("garbage")
	c.Response("null")
	p.Stdin.Close()
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("the proxy did not exit after its stdin closed")
	}
	p.Stdout.WaitEOF(10 * time.Second)
	if n := p.Stdout.Frames(); n != 6 {
		t.Errorf("the proxy wrote %d frames, want 6 (initialize, 3 results, a denial, a parse error)", n)
	}
	stderr := p.Stderr.String()
	if !strings.Contains(stderr, `"msg":"upstream stderr"`) || !strings.Contains(stderr, "msg=tools/call") {
		t.Errorf("the upstream's stderr did not reach the proxy's log on stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr, `"msg":"decision"`) {
		t.Errorf("no decisions logged on stderr:\n%s", stderr)
	}
}

// TestE2EUpstreamStderrLongLine: the upstream writes a 2 MiB line to its
// stderr, then 256 KiB more, before it starts serving. The proxy must keep
// draining the upstream's stderr, or the upstream blocks on the full pipe
// and never answers.
func TestE2EUpstreamStderrLongLine(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	script := `head -c 2097152 /dev/zero | tr '\0' x >&2; echo >&2; yes 'filler line' | head -c 262144 >&2; echo 'last line before serving' >&2; exec "$@"`
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok, Wrap: []string{"sh", "-c", script, "sh"}})
	s := p.Connect(mcptest.SessionOptions{})
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "echo")
	p.WaitLog("upstream stderr", mcptest.UpstreamLogged("last line before serving"))
	p.WaitLog("upstream stderr", func(m map[string]any) bool {
		return m["truncated"] == true && strings.HasPrefix(m["line"].(string), "xxxx")
	})
	p.WaitLog("upstream stderr", mcptest.UpstreamLogged("tool=echo"))
}

// ---------------------------------------------------------------------------
// 11. The decision log.

func TestE2EDecisionLog(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(mcptest.Budget(1000), "docs:read:/project/sub/**", "mcp:echo:*")
	del := delegationID(tok)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(mcptest.Priced("echo", 100)), Token: tok})
	s := p.Connect(mcptest.SessionOptions{})

	s.Call(t, "read_file", notesPath).OK(t, "read_file")
	s.Call(t, "read_file", map[string]any{"path": "/project/secret.md"})
	s.Call(t, "echo", map[string]any{"text": "x"}).OK(t, "echo")
	s.CallAs(t, "garbage", "echo", map[string]any{"text": "x"})
	s.Close()
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("the proxy did not exit")
	}

	want := []struct {
		tool       string
		allowed    bool
		reason     string
		delegation string
		cost       float64
	}{
		{"read_file", true, "granted", del, 0},
		{"read_file", false, "capability_not_granted", del, 0},
		{"echo", true, "granted", del, 100},
		{"echo", false, "malformed_token", "", 100},
	}
	// A refused call's line is written by the client's pump at once, an
	// allowed call's by the upstream's pump once it settles: the two pumps'
	// lines may interleave either way, so each wanted line is matched to
	// one line of the log.
	got := p.LogWith("decision", nil)
	if len(got) != len(want) {
		t.Fatalf("%d decision lines, want %d: %v", len(got), len(want), got)
	}
	used := make([]bool, len(got))
	for i, m := range got {
		for _, k := range []string{"tool", "allowed", "reason", "delegation", "cost", "latency"} {
			if _, ok := m[k]; !ok {
				t.Errorf("decision %d has no %q: %v", i, k, m)
			}
		}
		if l, ok := m["latency"].(float64); !ok || l < 0 {
			t.Errorf("decision %d latency = %v", i, m["latency"])
		}
	}
	for _, w := range want {
		found := false
		for i, m := range got {
			if !used[i] && m["tool"] == w.tool && m["allowed"] == w.allowed && m["reason"] == w.reason && m["delegation"] == w.delegation && m["cost"] == w.cost {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("no decision line with tool %s allowed %v reason %s delegation %q cost %v: %v", w.tool, w.allowed, w.reason, w.delegation, w.cost, got)
		}
	}
}
