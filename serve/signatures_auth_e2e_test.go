package serve_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// signedPost posts body to the server's /mcp in session sid (none if
// ""), signed with key's AVP-Sig in Authorization as an AVP client signs;
// extra headers are added (each value its own line).
func signedPost(t *testing.T, srv *mcptest.Server, key *identity.Keypair, sid, body string, extra map[string][]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.Base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	s, err := avpsig.Sign(key.PrivateKey(), http.MethodPost, "/mcp", "", []byte(body), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", s.Signature)
	for k, vs := range extra {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := (&http.Client{Timeout: mcptest.CallTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"avp","version":"1"}}}`

// An AVP client signs each request in Authorization (AVP-Sig), where
// serve read only a Bearer token: it answered 401 "must be Bearer <DCT>".
// Now the signature is read there, and the token is the server's --token
// or the request's own; two signatures are still refused.
func TestServeAVPSigInAuthorization(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: tok, Flags: []string{"--require-signature"}})

	code, body, hdr := signedPost(t, srv, e.Agent, "", initBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize signed in Authorization: HTTP %d %s; want a session", code, body)
	}
	if code, body, _ := signedPost(t, srv, e.Agent, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d %s", code, body)
	}
	code, body, _ = signedPost(t, srv, e.Agent, sid, mcptest.CallBody("1", "echo", map[string]any{"text": "signed"}), nil)
	if code != http.StatusOK || !strings.Contains(body, "signed") || strings.Contains(body, `"error"`) {
		t.Fatalf("a call signed in Authorization: HTTP %d %s; want its result", code, body)
	}
	// The request's own token (params._delegateos) is the one its
	// signature is checked against.
	own := e.Mint(nil, "mcp:echo:*")
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"own token"},"_delegateos":{"dct":"` + own.String() + `"}}}`
	if code, body, _ := signedPost(t, srv, e.Agent, sid, call, nil); code != http.StatusOK || !strings.Contains(body, "own token") || strings.Contains(body, `"error"`) {
		t.Fatalf("a call with its own token signed in Authorization: HTTP %d %s; want its result", code, body)
	}
	// Signed by another key: not the token's holder.
	other := mcptest.NewKey(t, "other")
	if code, body, _ := signedPost(t, srv, other, sid, mcptest.CallBody("2", "echo", map[string]any{"text": "x"}), nil); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Fatalf("a call signed by another key: HTTP %d %s; want it refused", code, body)
	}
	// Two signatures: Authorization and AVP-Signature, or two
	// Authorization values.
	second, err := avpsig.Sign(e.Agent.PrivateKey(), http.MethodPost, "/mcp", "", []byte(initBody), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, extra := range map[string]map[string][]string{
		"AVP-Signature too":        {avpsig.SignatureHeader: {second.Signature}},
		"two Authorization values": {"Authorization": {second.Signature}},
	} {
		if code, body, _ := signedPost(t, srv, e.Agent, "", initBody, extra); code != http.StatusUnauthorized || !strings.Contains(body, "signature") && !strings.Contains(body, "more than one") {
			t.Errorf("%s: HTTP %d %s; want 401", name, code, body)
		}
	}
}

// A signature in Authorization names no token: where the server needs one
// to start a session (no --token), it is no way around that.
func TestServeAVPSigInAuthorizationIsNoToken(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	if code, body, hdr := signedPost(t, srv, e.Agent, "", initBody, nil); code != http.StatusUnauthorized || hdr.Get("Mcp-Session-Id") != "" {
		t.Fatalf("initialize signed in Authorization, with no token anywhere: HTTP %d %s; want 401", code, body)
	}
}
