package serve_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// With --require-signature, a session opened by the agent's signature is
// bound to the agent: another principal, with a valid token of its own
// (holder: its key) and a valid signature by that key, must not post into
// it; an exact replay of the agent's signed call is refused; the scheme in
// other letter case is the same scheme (one signature, checked).
// Found by the red team of AVP-Sig in serve (was TestRTServeAVPSigSessionBinding).
func TestServeAVPSigSessionBoundToSigner(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: tok, Flags: []string{"--require-signature"}})
	code, body, hdr := signedPost(t, srv, e.Agent, "", initBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	signedPost(t, srv, e.Agent, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)

	other := mcptest.NewKey(t, "other")
	otherTok := e.Mint(func(p *dct.CreateParams) { p.Delegatee = other.ID() }, "mcp:echo:*")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hijack"},"_delegateos":{"dct":"` + otherTok.String() + `"}}}`
	if code, body, _ := signedPost(t, srv, other, sid, call, nil); code == http.StatusOK && strings.Contains(body, "hijack") {
		t.Errorf("another signer with its own token posted into the agent's session: HTTP %d %s", code, body)
	}
	// Sessionless, the same call is fine (control).
	if code, body, _ := signedPost(t, srv, other, "", call, nil); code != http.StatusOK || !strings.Contains(body, "hijack") {
		t.Logf("control (sessionless, own token, own signature): HTTP %d %s", code, body)
	}

	// Replay of one signed call, header and body as sent.
	callBody := mcptest.CallBody("8", "echo", map[string]any{"text": "once"})
	s, err := avpsig.Sign(e.Agent.PrivateKey(), http.MethodPost, "/mcp", "", []byte(callBody), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, scheme := range []string{"", "avp-sig", "AVP-SIG"} {
		v := s.Signature
		if scheme != "" {
			v = scheme + strings.TrimPrefix(v, avpsig.Scheme)
		}
		r := srv.Post(sid, map[string]string{"Authorization": v}, callBody)
		ok := r.Status == http.StatusOK && strings.Contains(string(r.Body), "once")
		if i == 0 && !ok {
			t.Fatalf("the signed call: HTTP %d %s", r.Status, r.Body)
		}
		if i > 0 && ok {
			t.Errorf("the same signature replayed as %q: HTTP %d %s", scheme, r.Status, r.Body)
		}
	}
}

// Without --require-signature an AVP-Sig in Authorization is not checked,
// yet serve binds the session to the DID it names ("AVP-Sig <did>"): a
// DID is public, so anyone holding the session id can write a header that
// names it, with any signature, and is taken for the session's signer.
// The agent's own session, opened with its signature, is then used by a
// header that no key signed. (A Bearer-bound session needs the token.)
// Found by the red team of AVP-Sig in serve (was TestRTServeAVPSigUnverifiedBinding).
func TestServeAVPSigUnverifiedBindsNoSession(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: tok})
	code, body, hdr := signedPost(t, srv, e.Agent, "", initBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize signed in Authorization: HTTP %d %s", code, body)
	}
	s, err := avpsig.Sign(mcptest.NewKey(t, "mallory").PrivateKey(), http.MethodPost, "/mcp", "", []byte("x"), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Mallory's well-formed header with the agent's did put in.
	forged := regexp.MustCompile(`did="[^"]*"`).ReplaceAllString(s.Signature, `did="`+e.Agent.DID()+`"`)
	r := srv.Post(sid, map[string]string{"Authorization": forged}, mcptest.CallBody("1", "echo", map[string]any{"text": "forged"}))
	t.Logf("forged: HTTP %d %s", r.Status, r.Body)
	if r.Status == http.StatusOK && strings.Contains(string(r.Body), "forged") {
		t.Errorf("a forged AVP-Sig naming the agent's DID was taken as the session's signer: HTTP %d %s", r.Status, r.Body)
	}
	// Control: no Authorization at all into the same session.
	r = srv.Post(sid, nil, mcptest.CallBody("2", "echo", map[string]any{"text": "bare"}))
	t.Logf("no Authorization into the signed session: HTTP %d %s", r.Status, r.Body)
	// The forged header ends the agent's session.
	r = srv.Do(http.MethodDelete, "/mcp", map[string]string{"Mcp-Session-Id": sid, "Authorization": forged}, "")
	if r.Status/100 == 2 {
		t.Errorf("a forged AVP-Sig naming the agent's DID deleted the agent's session: HTTP %d", r.Status)
	}
}

// Under --require-signature, a request's own token (params._delegateos)
// is the one its signature must be by the holder of, vendor methods too,
// whatever escapes spell the method: the agent signs requests carrying a
// token whose holder is another key.
// Found by the red team of AVP-Sig in serve (was TestRTServeAVPSigOwnTokenVendorMethod).
func TestServeAVPSigRequestTokenIsTheSigners(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	pol := e.Policy()
	pol.Extra = "methods:\n  - {method: acme/search, namespace: acme, action: search}\n"
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Token: tok, Flags: []string{"--require-signature"}})
	code, body, hdr := signedPost(t, srv, e.Agent, "", initBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	signedPost(t, srv, e.Agent, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	other := mcptest.NewKey(t, "other")
	otherTok := e.Mint(func(p *dct.CreateParams) { p.Delegatee = other.ID() }, "acme:search:*", "mcp:echo:*")
	own := `"_delegateos":{"dct":"` + otherTok.String() + `"}`
	for i, m := range []string{`acme/search`, `acme\/search`, `acme/\u0073earch`, `tools\/call`, `tools/\u0063all`} {
		params := `{` + own + `}`
		if strings.HasPrefix(m, "tools") {
			params = `{"name":"echo","arguments":{"text":"x"},` + own + `}`
		}
		b := `{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"` + m + `","params":` + params + `}`
		code, body, _ := signedPost(t, srv, e.Agent, sid, b, nil)
		if code == http.StatusOK && strings.Contains(body, `"result"`) {
			t.Errorf("%s with another key's token, signed by the agent: HTTP %d %s", m, code, body)
		}
		t.Logf("%s: HTTP %d %.200s", m, code, body)
	}
}

// A raw U+2028 inside a string (the TypeScript SDK's output) in a signed
// call under --require-signature: the signature check reads the token
// from the body as sent, the relay from the body with the separator
// escaped; both must accept it.
// Found by the red team of AVP-Sig in serve (was TestRTServeAVPSigLineSeparator).
func TestServeAVPSigLineSeparatorAccepted(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: tok, Flags: []string{"--require-signature"}})
	code, body, hdr := signedPost(t, srv, e.Agent, "", initBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	signedPost(t, srv, e.Agent, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	own := e.Mint(nil, "mcp:echo:*")
	for i, b := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a` + "\u2028" + `b"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a` + "\u2029" + `b"},"_delegateos":{"dct":"` + own.String() + `"}}}`,
	} {
		code, body, _ := signedPost(t, srv, e.Agent, sid, b, nil)
		if code != http.StatusOK || !strings.Contains(body, `"result"`) {
			t.Errorf("call %d with a raw line separator, signed: HTTP %d %.300s", i+1, code, body)
		}
	}
}
