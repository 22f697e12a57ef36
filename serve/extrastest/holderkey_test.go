//go:build unix

package extrastest

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
)

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"extrastest","version":"1"}}}`

// sign returns the headers of a request signed by k at a time.
func sign(t *testing.T, k *identity.Keypair, method, target, body string, at time.Time) map[string]string {
	t.Helper()
	path, query, _ := strings.Cut(target, "?")
	s, err := avpsig.Sign(k.PrivateKey(), method, path, query, []byte(body), at, nil)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{avpsig.SignatureHeader: s.Signature, avpsig.CoveredHeader: s.Covered}
}

func with(hs ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, h := range hs {
		for k, v := range h {
			out[k] = v
		}
	}
	return out
}

// A real MCP client (mcp-go's Streamable HTTP client) works through a
// server that requires signatures when its HTTP client signs with the
// token holder's key.
func TestSignedClientWorks(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature"}})

	c, err := client.NewStreamableHttpClient(srv.URL,
		transport.WithHTTPBasicClient(&http.Client{Transport: &avpsig.Transport{Key: e.Agent.PrivateKey()}}),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok.String()}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), mcptest.CallTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION,
		ClientInfo: mcp.Implementation{Name: "extrastest", Version: "1"}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // each request has its own nonce
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
	}

	// The same client with the token but without the key gets nowhere.
	bare, err := client.NewStreamableHttpClient(srv.URL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok.String()}))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if err := bare.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION,
		ClientInfo: mcp.Implementation{Name: "thief", Version: "1"}}}); err == nil {
		t.Fatal("a stolen bearer token without its key initialized a session")
	}
}

// Each way a signature can fail is refused with 401 and its own reason.
func TestSignatureRefusals(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature"}})
	bearer := mcptest.Bearer(tok)
	now := time.Now()

	// A signed session.
	res := srv.Do("POST", "/mcp", with(bearer, sign(t, e.Agent, "POST", "/mcp", initBody, now)), initBody)
	if res.Status != 200 {
		t.Fatalf("signed initialize: %d %s", res.Status, res.Body)
	}
	sid := res.Header.Get("Mcp-Session-Id")
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	if r := srv.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", note, now)), note); r.Status != 202 {
		t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	call := mcptest.CallBody("1", "echo", map[string]any{"text": "hi"})
	good := sign(t, e.Agent, "POST", "/mcp", call, now)
	if r := srv.Post(sid, with(bearer, good), call); r.Status != 200 || !strings.Contains(string(r.Body), `"result"`) {
		t.Fatalf("signed call: %d %s", r.Status, r.Body)
	}

	call2 := mcptest.CallBody("2", "echo", map[string]any{"text": "hi"})
	for _, c := range []struct {
		name   string
		target string
		hdr    map[string]string
		body   string
		reason avpsig.Reason
	}{
		{"missing", "/mcp", nil, call2, avpsig.ReasonMissing},
		{"wrong key", "/mcp", sign(t, e.Root, "POST", "/mcp", call2, now), call2, avpsig.ReasonWrongKey},
		{"stale", "/mcp", sign(t, e.Agent, "POST", "/mcp", call2, now.Add(-5*time.Minute)), call2, avpsig.ReasonStale},
		{"replayed", "/mcp", good, call, avpsig.ReasonReplayed},
		{"body tampered", "/mcp", sign(t, e.Agent, "POST", "/mcp", call2, now), strings.Replace(call2, "hi", "rm -rf", 1), avpsig.ReasonBodyTampered},
		{"query tampered", "/mcp?x=2", sign(t, e.Agent, "POST", "/mcp?x=1", call2, now), call2, avpsig.ReasonQueryTampered},
		{"malformed", "/mcp", map[string]string{avpsig.SignatureHeader: `AVP-Sig did="x"`}, call2, avpsig.ReasonMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := srv.Do("POST", c.target, with(bearer, map[string]string{"Mcp-Session-Id": sid}, c.hdr), c.body)
			if r.Status != 401 || !strings.Contains(string(r.Body), string(c.reason)) {
				t.Fatalf("%d %s; want 401 %s", r.Status, r.Body, c.reason)
			}
		})
	}
	// A GET of the session's stream is signed too.
	if r := srv.Do("GET", "/mcp", with(bearer, map[string]string{"Mcp-Session-Id": sid, "Accept": "text/event-stream"}), ""); r.Status != 401 {
		t.Fatalf("unsigned GET: %d %s", r.Status, r.Body)
	}
	// The session still works after the refusals.
	if r := srv.Post(sid, with(bearer, sign(t, e.Agent, "POST", "/mcp", call2, time.Now())), call2); r.Status != 200 || !strings.Contains(string(r.Body), `"result"`) {
		t.Fatalf("signed call after the refusals: %d %s", r.Status, r.Body)
	}
}

// The headers delegateos sign-request prints are accepted, once, by a
// server that requires signatures.
func TestSignRequestHeadersAccepted(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--require-signature"}})
	body := filepath.Join(e.Dir, "init.json")
	mcptest.WriteFile(t, body, initBody)
	tokFile := filepath.Join(e.Dir, "agent.tok")
	mcptest.WriteFile(t, tokFile, tok.String())
	out, errs, code := mcptest.CLI(t, "sign-request", "--key", e.KeyFile(e.Agent), "--token", "@"+tokFile, "--data", "@"+body, srv.URL+"?client=cli")
	if code != 0 {
		t.Fatalf("sign-request: %d %s", code, errs)
	}
	hdr := mcptest.Bearer(tok)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		hdr[k] = v
	}
	if r := srv.Do("POST", "/mcp?client=cli", hdr, initBody); r.Status != 200 {
		t.Fatalf("initialize with sign-request's headers: %d %s", r.Status, r.Body)
	}
	if r := srv.Do("POST", "/mcp?client=cli", hdr, initBody); r.Status != 401 || !strings.Contains(string(r.Body), string(avpsig.ReasonReplayed)) {
		t.Fatalf("the same headers again: %d %s", r.Status, r.Body)
	}
}
