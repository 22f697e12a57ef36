//go:build unix

package oauth_test

// Red team of the authorization server (issue 23): attacks that held,
// kept in the suite so that they keep holding. Each runs through the real
// binary; none repeats attacks_test.go.

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Token exchange never hands out more than its subject holds: a budget
// above it, an expires_in that overflows, scopes with glob tricks, an
// exchange past the grant's chain depth, and subject tokens that are not
// access tokens are all refused.
// Tried by the red team of the authorization server (issue 23); the attack held (was TestRTHeldExchangeCannotWiden).
func TestExchangeCannotWiden(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "agent")
	tr := c.tokens("mcp:echo:* docs:read:/project/**", "") // budget 500000, 30 min
	parent := tr["access_token"].(string)
	exchange := func(subject, scope string, extra url.Values) (int, map[string]any) {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {subject},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}, "scope": {scope}}
		for k, v := range extra {
			form[k] = v
		}
		return a.post(t, "/token", "application/x-www-form-urlencoded", form.Encode(), nil)
	}
	for name, tc := range map[string]struct {
		subject, scope string
		extra          url.Values
	}{
		"a budget above the subject's":     {parent, "mcp:echo:*", url.Values{"budget": {"500001"}}},
		"a negative budget":                {parent, "mcp:echo:*", url.Values{"budget": {"-1"}}},
		"a budget that is not a number":    {parent, "mcp:echo:*", url.Values{"budget": {"1e9"}}},
		"a glob with .. past the resource": {parent, "docs:read:/project/**/../../**", nil},
		"a brace alternative outside":      {parent, "docs:read:/project/{x,/../etc}/**", nil},
		"a wildcard action":                {parent, "docs:*:/project/**", nil},
		"everything":                       {parent, "*:*:*", nil},
		"a refresh token as subject":       {tr["refresh_token"].(string), "mcp:echo:*", nil},
		"an actor token":                   {parent, "mcp:echo:*", url.Values{"actor_token": {parent}, "actor_token_type": {"urn:ietf:params:oauth:token-type:access_token"}}},
		"a subject type of id_token":       {parent, "mcp:echo:*", url.Values{"subject_token_type": {"urn:ietf:params:oauth:token-type:id_token"}}},
	} {
		if st, m := exchange(tc.subject, tc.scope, tc.extra); st != http.StatusBadRequest {
			t.Errorf("exchange with %s: HTTP %d %v, want 400", name, st, m)
		}
	}
	// An expires_in whose seconds overflow a time.Duration must not make
	// a token outliving its subject.
	if st, m := exchange(parent, "mcp:echo:*", url.Values{"expires_in": {"9223372037"}}); st == http.StatusOK && m["expires_in"].(float64) > tr["expires_in"].(float64) {
		t.Errorf("an overflowing expires_in: a token of %v s from a subject of %v s", m["expires_in"], tr["expires_in"])
	}
	// The grant allows 3 delegations: the consent, the access token, one
	// exchange. An exchange of the exchanged token is past it.
	st, m := exchange(parent, "mcp:echo:*", url.Values{"budget": {"100"}})
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, m)
	}
	child := m["access_token"].(string)
	ct, _ := dct.ParseInput(child)
	if blocks := ct.Unverified().Attenuations; len(blocks) == 0 || blocks[len(blocks)-1].MaxBudgetMicrocents == nil || *blocks[len(blocks)-1].MaxBudgetMicrocents != 100 {
		t.Errorf("the exchanged token's own budget is not the 100 asked for")
	}
	if st, m := exchange(child, "mcp:echo:*", nil); st != http.StatusBadRequest {
		t.Errorf("an exchange past the grant's chain depth: HTTP %d %v, want 400", st, m)
	}
}

// Redirect URIs match exactly: none of the usual near-misses (case, a
// trailing slash, another loopback port or name, an encoded slash, user
// information, a fragment, a leading zero in the port) reaches the
// client's redirect, and none is sent anywhere; registration refuses
// hosts that only look like loopback.
// Tried by the red team of the authorization server (issue 23); the attack held (was TestRTHeldRedirectNearMisses).
func TestRedirectNearMissesRefused(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c") // http://127.0.0.1:9/callback
	for _, r := range []string{
		"http://127.0.0.1:9/Callback", "http://127.0.0.1:9/callback/", "http://127.0.0.1:10/callback",
		"http://localhost:9/callback", "http://127.0.0.1/callback", "http://127.0.0.1:9/callback%2F",
		"http://u@127.0.0.1:9/callback", "HTTP://127.0.0.1:9/callback", "http://127.0.0.1:9/callback#x",
		"http://127.0.0.1:09/callback", "http://127.0.0.1:9/%63allback", "http://[::1]:9/callback", " http://127.0.0.1:9/callback",
	} {
		q := c.authorizeParams("mcp:echo:*")
		q.Set("redirect_uri", r)
		res, _ := c.get(q)
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
			t.Errorf("redirect_uri %q: HTTP %d to %q: want a 400 page", r, res.StatusCode, res.Header.Get("Location"))
		}
	}
	for _, r := range []string{
		"http://localhost.evil.example/cb", "http://127.0.0.1.nip.io/cb", "http://127.1/cb", "http://0x7f000001/cb",
		"http://localhost./cb", "http://2130706433/cb", "//evil.example/cb", "http:/127.0.0.1/cb", "https://app.example\\@evil.example/cb",
		"https://evil.example%2f@app.example/cb", "data:text/html,x", "file:///etc/passwd",
	} {
		st, m := a.post(t, "/register", "application/json", mcptest.JSON(map[string]any{"redirect_uris": []string{r}}), nil)
		if st != http.StatusBadRequest || m["error"] != "invalid_redirect_uri" {
			t.Errorf("registering %q: HTTP %d %v, want invalid_redirect_uri", r, st, m)
		}
	}
}

// The endpoints answer only hosts serve answers for (the issuer is made
// from Host), and /token and /register take only POSTs of their own media
// type (a browser's "simple" cross-site POST is text/plain or a
// multipart form): parameters in the query string are not read.
// Tried by the red team of the authorization server (issue 23); the attack held (was TestRTHeldHostAndMethodConfusion).
func TestEndpointsRefuseOtherHostsAndMethods(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp", "/authorize", "/register"} {
		if r := a.srv.Do(http.MethodGet, p, map[string]string{"Host": "evil.example"}, ""); r.Status != http.StatusForbidden || strings.Contains(string(r.Body), "evil.example/") {
			t.Errorf("GET %s with Host evil.example: HTTP %d %s, want 403", p, r.Status, r.Body)
		}
	}
	if r := a.srv.Do(http.MethodGet, "/.well-known/oauth-authorization-server", map[string]string{"Host": "localhost:1@evil.example"}, ""); r.Status != http.StatusForbidden && r.Status != http.StatusBadRequest {
		t.Errorf("a Host with user information: HTTP %d %s", r.Status, r.Body)
	}
	c := a.register(t, "c")
	code := c.code("mcp:echo:*")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {c.id}, "redirect_uri": {c.redirect}, "code_verifier": {c.verifier}}
	if r := a.srv.Do(http.MethodGet, "/token?"+form.Encode(), nil, ""); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("GET /token with the code in the query: HTTP %d %s", r.Status, r.Body)
	}
	for _, ct := range []string{"text/plain", "multipart/form-data; boundary=x", "application/json", "application/x-www-form-urlencodedx"} {
		if st, m := a.post(t, "/token", ct, form.Encode(), nil); st != http.StatusBadRequest || m["error"] != "invalid_request" {
			t.Errorf("POST /token as %s: HTTP %d %v", ct, st, m)
		}
	}
	if st, m := a.post(t, "/token?"+form.Encode(), "application/x-www-form-urlencoded", "", nil); st != http.StatusBadRequest || m["access_token"] != nil {
		t.Errorf("POST /token with the parameters in the query: HTTP %d %v", st, m)
	}
	hreq, _ := http.NewRequest(http.MethodPost, a.srv.Base+"/token", strings.NewReader(form.Encode()))
	hreq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hreq.Host = "evil.example"
	hres, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	hres.Body.Close()
	if hres.StatusCode != http.StatusForbidden {
		t.Errorf("POST /token with Host evil.example: HTTP %d", hres.StatusCode)
	}
	// The code was never presented: it still works.
	if st, m := c.exchange(code, ""); st != http.StatusOK {
		t.Errorf("the code after refused requests that never reached the grant: HTTP %d %v", st, m)
	}
	reg := `{"redirect_uris":["https://app.example/cb"]}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/jsonx"} {
		if st, m := a.post(t, "/register", ct, reg, nil); st != http.StatusBadRequest {
			t.Errorf("POST /register as %s: HTTP %d %v", ct, st, m)
		}
	}
	for _, p := range []string{"/register", "/token"} {
		if r := a.srv.Do(http.MethodPut, p, map[string]string{"Content-Type": "application/json"}, reg); r.Status != http.StatusMethodNotAllowed {
			t.Errorf("PUT %s: HTTP %d", p, r.Status)
		}
	}
}

// jws signs a compact JWS of hdr and claims with key (ES256).
func jws(key *dpopKey, hdr, claims map[string]any) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(mcptest.JSON(hdr))) + "." + enc.EncodeToString([]byte(mcptest.JSON(claims)))
	d := sha256.Sum256([]byte(signing))
	r, s, _ := ecdsa.Sign(rand.Reader, key.k, d[:])
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig)
}

func (d *dpopKey) jwk() map[string]any {
	enc := base64.RawURLEncoding
	pub, _ := d.k.PublicKey.Bytes()
	return map[string]any{"kty": "EC", "crv": "P-256", "x": enc.EncodeToString(pub[1:33]), "y": enc.EncodeToString(pub[33:])}
}

// DPoP proofs at /token that must be refused: alg none and HS256 (keyed
// with the public key), a jwk with its private part, another typ, an ath
// on a token request, an htu naming another host (localhost for
// 127.0.0.1), a jti of 300 bytes, a non-integer iat, and an ES256
// signature claimed as EdDSA.
// Tried by the red team of the authorization server (issue 23); the attack held (was TestRTHeldDPoPProofForms).
func TestDPoPProofFormsRefused(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	key := newDPoPKey(t)
	htu := a.srv.Base + "/token"
	now := time.Now().Unix()
	claims := func(mod func(map[string]any)) map[string]any {
		m := map[string]any{"jti": randomVerifier(), "htm": "POST", "htu": htu, "iat": now}
		if mod != nil {
			mod(m)
		}
		return m
	}
	hdr := func(mod func(map[string]any)) map[string]any {
		m := map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": key.jwk()}
		if mod != nil {
			mod(m)
		}
		return m
	}
	enc := base64.RawURLEncoding
	unsigned := enc.EncodeToString([]byte(mcptest.JSON(hdr(func(h map[string]any) { h["alg"] = "none" })))) + "." + enc.EncodeToString([]byte(mcptest.JSON(claims(nil)))) + "."
	hsInput := enc.EncodeToString([]byte(mcptest.JSON(hdr(func(h map[string]any) { h["alg"] = "HS256" })))) + "." + enc.EncodeToString([]byte(mcptest.JSON(claims(nil))))
	mac := hmac.New(sha256.New, []byte(mcptest.JSON(key.jwk())))
	mac.Write([]byte(hsInput))
	hs256 := hsInput + "." + enc.EncodeToString(mac.Sum(nil))
	priv := key.jwk()
	d, err := key.k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	priv["d"] = enc.EncodeToString(d)
	other := strings.Replace(a.srv.Base, "127.0.0.1", "localhost", 1) + "/token"
	for name, proof := range map[string]string{
		"alg none":                   unsigned,
		"HS256 keyed with the jwk":   hs256,
		"a jwk with its private key": jws(key, hdr(func(h map[string]any) { h["jwk"] = priv }), claims(nil)),
		"typ JWT":                    jws(key, hdr(func(h map[string]any) { h["typ"] = "JWT" }), claims(nil)),
		"an ath at /token":           jws(key, hdr(nil), claims(func(m map[string]any) { m["ath"] = enc.EncodeToString(make([]byte, 32)) })),
		"an htu of another host":     jws(key, hdr(nil), claims(func(m map[string]any) { m["htu"] = other })),
		"a jti of 300 bytes":         jws(key, hdr(nil), claims(func(m map[string]any) { m["jti"] = strings.Repeat("j", 300) })),
		"an iat as a string":         jws(key, hdr(nil), claims(func(m map[string]any) { m["iat"] = "now" })),
		"an iat with a fraction":     jws(key, hdr(nil), claims(func(m map[string]any) { m["iat"] = float64(now) + 0.5 })),
		"ES256 claimed as EdDSA":     jws(key, hdr(func(h map[string]any) { h["alg"] = "EdDSA" }), claims(nil)),
		"htm in lower case":          jws(key, hdr(nil), claims(func(m map[string]any) { m["htm"] = "post" })),
	} {
		if st, m := c.exchange("not-a-code", proof); st != http.StatusBadRequest || m["error"] != "invalid_dpop_proof" {
			t.Errorf("a token request with a proof with %s: HTTP %d %v, want invalid_dpop_proof", name, st, m)
		}
	}
	// Two DPoP headers: which one would count?
	form := url.Values{"grant_type": {"authorization_code"}, "code": {"x"}, "client_id": {c.id}}
	req, _ := http.NewRequest(http.MethodPost, htu, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Add("DPoP", key.proof("POST", htu, "", time.Now()))
	req.Header.Add("DPoP", key.proof("POST", htu, "", time.Now()))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("two DPoP headers: HTTP %d", res.StatusCode)
	}
}

// Nothing secret reaches serve's log: not the access or refresh token,
// the code, the PKCE verifier, the CSRF token nor a password typed (right
// or wrong), through a flow, a refresh, an exchange and refusals.
// Tried by the red team of the authorization server (issue 23); the attack held (was TestRTHeldNoSecretsInLog).
func TestLogHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	req, csrf := c.consentPage("mcp:echo:*")
	wrong := approveForm(req, csrf, "0")
	wrong.Set("password", "wrong password 12345")
	c.submit(wrong, nil)
	res, _ := c.submit(approveForm(req, csrf, "0"), nil)
	loc, _ := url.Parse(res.Header.Get("Location"))
	code := loc.Query().Get("code")
	st, tr := c.exchange(code, "")
	if st != http.StatusOK {
		t.Fatalf("token: %d %v", st, tr)
	}
	st, tr2 := c.refresh(tr["refresh_token"].(string), "")
	if st != http.StatusOK {
		t.Fatalf("refresh: %d %v", st, tr2)
	}
	c.exchange(code, "") // a reuse, refused and logged
	a.initialize(t, bearer(tr["access_token"].(string)+"x"))
	log := a.srv.Log()
	for name, secret := range map[string]string{
		"the access token": tr["access_token"].(string), "the refresh token": tr["refresh_token"].(string),
		"the refreshed token": tr2["access_token"].(string), "the new refresh token": tr2["refresh_token"].(string),
		"the code": code, "the PKCE verifier": c.verifier, "the CSRF token": csrf, "the password": password,
		"a wrong password": "wrong password 12345",
	} {
		if strings.Contains(log, secret) {
			t.Errorf("%s is in serve's log", name)
		}
	}
}

// The refusal pages (shown before the client is known) cannot be framed
// either, and the consent page's form-action names only this server and
// the redirect's origin.
// Tried by the red team of the authorization server (issue 23); the attack held (was TestRTHeldErrorPageHeaders).
func TestErrorPagesCannotBeFramed(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	q := c.authorizeParams("mcp:echo:*")
	q.Set("client_id", "dos_nope")
	res, _ := c.get(q)
	if csp := res.Header.Get("Content-Security-Policy"); res.StatusCode != http.StatusBadRequest || !strings.Contains(csp, "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the refusal page: HTTP %d, headers %v", res.StatusCode, res.Header)
	}
	res, _ = c.get(c.authorizeParams("mcp:echo:*"))
	if csp := res.Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "form-action 'self' http://127.0.0.1:9") {
		t.Errorf("the consent page's CSP: %q", csp)
	}
}

// Token exchange of a subject whose consent was revoked, or whose family
// was ended by a refresh reuse, is refused; another client presenting a
// live refresh token neither gets tokens nor burns it.
// Tried by the red team of the authorization server (issue 23); the attack held (was TestRTHeldExchangeOfRevokedOrEndedSubject).
func TestExchangeOfRevokedOrEndedSubjectRefused(t *testing.T) {
	t.Parallel()
	var revs string
	a := startAS(t, func(e *mcptest.Env, p *mcptest.Policy) {
		revs = filepath.Join(e.Dir, "revocations.json")
		mcptest.WriteFile(t, revs, "[]\n")
		p.RevocationList = revs
	})
	c := a.register(t, "agent")
	exchange := func(subject string) (int, map[string]any) {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {subject},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}, "scope": {"mcp:echo:*"}}
		return a.post(t, "/token", "application/x-www-form-urlencoded", form.Encode(), nil)
	}
	// Another client with a live refresh token.
	tr := c.tokens("mcp:echo:*", "")
	thief := a.register(t, "thief")
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tr["refresh_token"].(string)}, "client_id": {thief.id}}
	if st, m := a.post(t, "/token", "application/x-www-form-urlencoded", form.Encode(), nil); st != http.StatusBadRequest || m["access_token"] != nil {
		t.Errorf("another client's live refresh token: HTTP %d %v", st, m)
	}
	if st, m := c.refresh(tr["refresh_token"].(string), ""); st != http.StatusOK {
		t.Errorf("the refresh token after another client presented it: HTTP %d %v, want it still live", st, m)
	}
	// Ended by a reuse.
	tr = c.tokens("mcp:echo:*", "")
	c.refresh(tr["refresh_token"].(string), "")
	c.refresh(tr["refresh_token"].(string), "")
	if st, m := exchange(tr["access_token"].(string)); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("an exchange of a token whose family was ended: HTTP %d %v", st, m)
	}
	// Revoked consent.
	tr = c.tokens("mcp:echo:*", "")
	tok := tr["access_token"].(string)
	tokFile := filepath.Join(a.e.Dir, "access.tok")
	mcptest.WriteFile(t, tokFile, tok)
	if _, stderr, code := mcptest.CLI(t, "revoke", "--key", filepath.Join(a.e.Dir, "agent.key"), "--token", "@"+tokFile,
		"--block", fmt.Sprint(a.grant.Blocks()), "--list", revs); code != 0 {
		t.Fatalf("revoke: %s", stderr)
	}
	if r := a.initialize(t, bearer(tok)); r.Status != http.StatusUnauthorized {
		t.Fatalf("the revoked token: HTTP %d (the revocation is not seen yet)", r.Status)
	}
	if st, m := exchange(tok); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("an exchange of a token whose consent was revoked: HTTP %d %v", st, m)
	}
}
