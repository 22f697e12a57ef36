//go:build unix

package oauth_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Registration refuses what would let a client steal codes or
// authenticate in ways the server does not check.
func TestRegistrationRefusals(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	for _, c := range []struct{ body, want string }{
		{`{"redirect_uris":["http://evil.example/cb"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://app.example/cb#frag"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["javascript:alert(1)"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://u:p@app.example/cb"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":[]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://app.example/cb"],"grant_types":["client_credentials"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://app.example/cb"],"response_types":["token"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"redirect_uris":["https://b.example/cb"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://app.example/cb"],"client_name":"a\u0007b"}`, "invalid_client_metadata"},
	} {
		st, m := a.post(t, "/register", "application/json", c.body, nil)
		if st != http.StatusBadRequest || m["error"] != c.want {
			t.Errorf("register %s: HTTP %d %v, want 400 %s", c.body, st, m, c.want)
		}
	}
	big := `{"redirect_uris":["https://app.example/cb"],"client_name":"` + strings.Repeat("x", 20<<10) + `"}`
	if st, _ := a.post(t, "/register", "application/json", big, nil); st != http.StatusRequestEntityTooLarge {
		t.Errorf("a 20 KiB registration: HTTP %d, want 413", st)
	}
}

// Anyone may register, so unapproved registrations are bounded: a flood
// forgets the oldest unapproved clients, and keeps approved ones.
func TestRegistrationFloodIsBounded(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	approved := a.register(t, "approved")
	approved.code("mcp:echo:*")
	first := a.register(t, "first")
	for i := 0; i < 300; i++ {
		a.register(t, fmt.Sprint("flood ", i))
	}
	if res, page := first.get(first.authorizeParams("")); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Unknown client_id") {
		t.Fatalf("the oldest unapproved client after a flood: HTTP %d", res.StatusCode)
	}
	approved.consentPage("mcp:echo:*") // still registered
}

// Before the client and its redirect URI are known good, a refusal is a
// page, never a redirect (no open redirector); after, errors go back to
// the client with its state.
func TestAuthorizeRefusals(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	for _, tc := range []struct {
		name string
		mod  func(url.Values)
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "dos_nope") }},
		{"another redirect", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }},
		{"a redirect with a suffix", func(q url.Values) { q.Set("redirect_uri", c.redirect+"/../evil") }},
		{"a redirect with a query", func(q url.Values) { q.Set("redirect_uri", c.redirect+"?x=1") }},
		{"no redirect", func(q url.Values) { q.Del("redirect_uri") }},
	} {
		q := c.authorizeParams("mcp:echo:*")
		tc.mod(q)
		res, _ := c.get(q)
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
			t.Errorf("%s: HTTP %d to %q: want a 400 page and no redirect", tc.name, res.StatusCode, res.Header.Get("Location"))
		}
	}
	for _, tc := range []struct {
		name, want string
		mod        func(url.Values)
	}{
		{"no state", "invalid_request", func(q url.Values) { q.Del("state") }},
		{"plain PKCE", "invalid_request", func(q url.Values) { q.Set("code_challenge_method", "plain") }},
		{"no PKCE", "invalid_request", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }},
		{"implicit flow", "unsupported_response_type", func(q url.Values) { q.Set("response_type", "token") }},
		{"a scope wider than the grant", "invalid_scope", func(q url.Values) { q.Set("scope", "docs:write:/**") }},
		{"a scope the grant lacks", "invalid_scope", func(q url.Values) { q.Set("scope", "mcp:echo:* mcp:crash:*") }},
		{"another resource", "invalid_target", func(q url.Values) { q.Set("resource", "https://other.example/mcp") }},
	} {
		q := c.authorizeParams("mcp:echo:*")
		tc.mod(q)
		res, _ := c.get(q)
		loc, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || loc == nil || !strings.HasPrefix(loc.String(), c.redirect+"?") || loc.Query().Get("error") != tc.want {
			t.Errorf("%s: HTTP %d to %q: want a redirect with error=%s", tc.name, res.StatusCode, res.Header.Get("Location"), tc.want)
		}
	}
}

// The consent page cannot be framed, and its form needs the page's own
// CSRF token and cookie, from this origin; a consent page is closed after
// five wrong passwords, so the right one no longer opens it.
func TestConsentAttacks(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	res, _ := c.get(c.authorizeParams("mcp:echo:*"))
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("consent page headers: %v", res.Header)
	}
	req, csrf := c.consentPage("mcp:echo:*")
	// Another browser (no cookie), as a cross-site form post would be.
	other := a.register(t, "other")
	if res, _ := other.submit(approveForm(req, csrf, "0"), nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("consent without the page's cookie: HTTP %d, want 403", res.StatusCode)
	}
	if res, _ := c.submit(approveForm(req, strings.Repeat("0", 64), "0"), nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("consent with a wrong CSRF token: HTTP %d, want 403", res.StatusCode)
	}
	if res, _ := c.submit(approveForm(req, csrf, "0"), map[string]string{"Origin": "https://evil.example"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("consent posted from another origin: HTTP %d, want 403", res.StatusCode)
	}
	// Narrowing only: a capability not asked for, a budget or an expiry
	// beyond the grant's.
	for name, f := range map[string]url.Values{
		"a capability not asked for": approveForm(req, csrf, "1"),
		"a budget above the grant's": func() url.Values { f := approveForm(req, csrf, "0"); f.Set("budget", "1000001"); return f }(),
		"an expiry past the grant's": func() url.Values { f := approveForm(req, csrf, "0"); f.Set("expires_in", "600"); return f }(),
	} {
		if res, body := c.submit(f, nil); res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
			t.Errorf("%s: HTTP %d %s: want the page again, 400", name, res.StatusCode, body)
		}
	}
	// Denying sends the client an access_denied; the page is then gone.
	req2, csrf2 := c.consentPage("mcp:echo:*")
	deny := approveForm(req2, csrf2, "0")
	deny.Set("decision", "deny")
	res, _ = c.submit(deny, nil)
	if loc, _ := url.Parse(res.Header.Get("Location")); res.StatusCode != http.StatusSeeOther || loc == nil || loc.Query().Get("error") != "access_denied" || loc.Query().Get("code") != "" {
		t.Errorf("deny: HTTP %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := c.submit(approveForm(req2, csrf2, "0"), nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("approving a denied request: HTTP %d, want 400", res.StatusCode)
	}
	for i := 0; i < 5; i++ {
		f := approveForm(req, csrf, "0")
		f.Set("password", fmt.Sprint("guess ", i))
		if res, _ := c.submit(f, nil); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: HTTP %d, want 401", i, res.StatusCode)
		}
	}
	if res, body := c.submit(approveForm(req, csrf, "0"), nil); res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
		t.Fatalf("the right password after five wrong ones on the page: HTTP %d (%s), want 400 (the page is closed)", res.StatusCode, body)
	}
}

// A code is single-use and bound to its client, redirect URI and PKCE
// verifier; a wrong verifier burns it; presenting a used code ends the
// tokens it was exchanged for.
func TestCodeAttacks(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	thief := a.register(t, "thief")

	code := c.code("mcp:echo:*")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {thief.id}, "redirect_uri": {c.redirect}, "code_verifier": {c.verifier}}
	if st, m := a.post(t, "/token", "application/x-www-form-urlencoded", form.Encode(), nil); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("another client's code: HTTP %d %v", st, m)
	}
	if st, m := c.exchange(code, ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("a code presented before (by the thief): HTTP %d %v, want invalid_grant", st, m)
	}

	code = c.code("mcp:echo:*")
	saved := c.verifier
	c.verifier = randomVerifier()
	if st, m := c.exchange(code, ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("a wrong PKCE verifier: HTTP %d %v", st, m)
	}
	c.verifier = saved
	if st, m := c.exchange(code, ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("the right verifier after a wrong one: HTTP %d %v, want invalid_grant (the code is burnt)", st, m)
	}

	code = c.code("mcp:echo:*")
	form = url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {c.id}, "redirect_uri": {c.redirect + "x"}, "code_verifier": {c.verifier}}
	if st, m := a.post(t, "/token", "application/x-www-form-urlencoded", form.Encode(), nil); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("another redirect_uri: HTTP %d %v", st, m)
	}

	code = c.code("mcp:echo:*")
	st, m := c.exchange(code, "")
	if st != http.StatusOK {
		t.Fatalf("token: %d %v", st, m)
	}
	tok := m["access_token"].(string)
	if r := a.initialize(t, bearer(tok)); r.Status != http.StatusOK {
		t.Fatalf("initialize with the token: %d %s", r.Status, r.Body)
	}
	if st, m := c.exchange(code, ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("the code again: HTTP %d %v", st, m)
	}
	if r := a.initialize(t, bearer(tok)); r.Status != http.StatusUnauthorized {
		t.Errorf("the token of a code presented twice: HTTP %d, want 401", r.Status)
	}
	if st, m := c.refresh(m["refresh_token"].(string), ""); st == http.StatusOK {
		t.Errorf("the refresh token of a code presented twice: HTTP %d %v", st, m)
	}
}

// A token minted from the grant by anyone but this process (here: with
// the grant key, by hand) is refused: a token the server did not issue,
// or one issued before it restarted, might be a DPoP-bound one.
func TestForeignGrantTokenRefused(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	other := mcptest.NewKey(t, "other")
	tok := mcptest.Attenuate(t, a.grant, a.e.Agent, other, 10, "mcp:echo:*")
	if r := a.initialize(t, bearer(tok.String())); r.Status != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("a hand-made attenuation of the grant: HTTP %d %q", r.Status, r.Header.Get("WWW-Authenticate"))
	}
	// The grant's own holder is not refused by the authorization server.
	if r := a.initialize(t, bearer(a.grant.String())); r.Status != http.StatusOK {
		t.Fatalf("the grant itself: HTTP %d %s", r.Status, r.Body)
	}
}

// Refresh tokens rotate; a rotated one presented again ends the family:
// the newest refresh token and every access token of it are refused.
func TestRefreshRotationAndReuse(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	tr := c.tokens("mcp:echo:*", "")
	rt1 := tr["refresh_token"].(string)
	st, tr2 := c.refresh(rt1, "")
	if st != http.StatusOK || tr2["refresh_token"] == rt1 {
		t.Fatalf("refresh: %d %v", st, tr2)
	}
	tok2 := tr2["access_token"].(string)
	if r := a.initialize(t, bearer(tok2)); r.Status != http.StatusOK {
		t.Fatalf("refreshed token: %d %s", r.Status, r.Body)
	}
	if st, m := c.refresh(rt1, ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Fatalf("a rotated refresh token again: %d %v", st, m)
	}
	if st, m := c.refresh(tr2["refresh_token"].(string), ""); st != http.StatusBadRequest {
		t.Errorf("the newest refresh token after a reuse: %d %v, want refused", st, m)
	}
	if r := a.initialize(t, bearer(tok2)); r.Status != http.StatusUnauthorized {
		t.Errorf("an access token of a family ended by reuse: HTTP %d, want 401", r.Status)
	}
	// Refresh may narrow, never widen.
	tr = c.tokens("mcp:echo:*", "")
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tr["refresh_token"].(string)}, "client_id": {c.id}, "scope": {"mcp:echo:* docs:read:/project/**"}}
	if st, m := a.post(t, "/token", "application/x-www-form-urlencoded", form.Encode(), nil); st != http.StatusBadRequest || m["error"] != "invalid_scope" {
		t.Errorf("a refresh asking for more than was approved: %d %v", st, m)
	}
}

// DPoP: the token is bound to the proof's key; it is refused as a
// Bearer token, without a proof, with a proof of another key, method,
// URL or token, with a stale proof and with a replayed one.
func TestDPoPBinding(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "c")
	key := newDPoPKey(t)
	tokenURL := a.srv.Base + "/token"
	code := c.code("mcp:echo:*")
	if st, m := c.exchange(code, key.proof("GET", tokenURL, "", time.Now())); st != http.StatusBadRequest || m["error"] != "invalid_dpop_proof" {
		t.Fatalf("a token request with a proof for GET: %d %v", st, m)
	}
	st, tr := c.exchange(c.code("mcp:echo:*"), key.proof("POST", tokenURL, "", time.Now()))
	if st != http.StatusOK || tr["token_type"] != "DPoP" {
		t.Fatalf("token with DPoP: %d %v", st, tr)
	}
	tok := tr["access_token"].(string)
	dpop := func(p string) map[string]string { return map[string]string{"Authorization": "DPoP " + tok, "DPoP": p} }
	now := time.Now()
	for name, hdr := range map[string]map[string]string{
		"as a Bearer token":      bearer(tok),
		"without a proof":        {"Authorization": "DPoP " + tok},
		"with another key":       dpop(newDPoPKey(t).proof("POST", a.srv.URL, tok, now)),
		"for another method":     dpop(key.proof("GET", a.srv.URL, tok, now)),
		"for another URL":        dpop(key.proof("POST", a.srv.Base+"/other", tok, now)),
		"for another token":      dpop(key.proof("POST", a.srv.URL, tok+"x", now)),
		"without ath":            dpop(key.proof("POST", a.srv.URL, "", now)),
		"made five minutes ago":  dpop(key.proof("POST", a.srv.URL, tok, now.Add(-5*time.Minute))),
		"made for in an hour":    dpop(key.proof("POST", a.srv.URL, tok, now.Add(time.Hour))),
		"with a bad signature":   dpop(key.proof("POST", a.srv.URL, tok, now)[:20] + "x" + key.proof("POST", a.srv.URL, tok, now)[21:]),
		"with a tampered claims": dpop(tamperClaims(key.proof("POST", a.srv.URL, tok, now))),
	} {
		r := a.initialize(t, hdr)
		if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "DPoP error=") {
			t.Errorf("the DPoP-bound token %s: HTTP %d, %q: want 401 with a DPoP challenge", name, r.Status, r.Header.Get("WWW-Authenticate"))
		}
	}
	good := key.proofJTI("POST", a.srv.URL, tok, now, "jti-once")
	r := a.initialize(t, dpop(good))
	if r.Status != http.StatusOK {
		t.Fatalf("the DPoP-bound token with its proof: HTTP %d %s", r.Status, r.Body)
	}
	sid := r.Header.Get("Mcp-Session-Id")
	h := dpop(good)
	h["Mcp-Session-Id"] = sid
	if r := a.srv.Do(http.MethodPost, "/mcp", h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusUnauthorized {
		t.Errorf("a replayed proof: HTTP %d, want 401", r.Status)
	}
	h = dpop(key.proof("POST", a.srv.URL, tok, time.Now()))
	h["Mcp-Session-Id"] = sid
	if r := a.srv.Do(http.MethodPost, "/mcp", h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusAccepted {
		t.Errorf("a fresh proof in the session: HTTP %d %s", r.Status, r.Body)
	}
	// The refresh token is bound too.
	if st, m := c.refresh(tr["refresh_token"].(string), ""); st != http.StatusBadRequest || m["error"] != "invalid_dpop_proof" {
		t.Errorf("refresh of a DPoP-bound family without a proof: %d %v", st, m)
	}
	if st, m := c.refresh(tr["refresh_token"].(string), newDPoPKey(t).proof("POST", tokenURL, "", time.Now())); st != http.StatusBadRequest {
		t.Errorf("refresh with another key's proof: %d %v", st, m)
	}
	proof := key.proof("POST", tokenURL, "", time.Now())
	st, m := c.refresh(tr["refresh_token"].(string), proof)
	if st != http.StatusOK || m["token_type"] != "DPoP" {
		t.Fatalf("refresh with the key's proof: %d %v", st, m)
	}
	newest := m["refresh_token"].(string)
	if st, m := c.refresh(newest, proof); st != http.StatusBadRequest || m["error"] != "invalid_dpop_proof" {
		t.Errorf("a refresh with a proof used before: %d %v", st, m)
	}
	// A thief holding the rotated refresh token but not the key cannot
	// end the family by presenting it.
	if st, m := c.refresh(tr["refresh_token"].(string), newDPoPKey(t).proof("POST", tokenURL, "", time.Now())); st != http.StatusBadRequest || m["error"] != "invalid_dpop_proof" {
		t.Errorf("a rotated DPoP-bound refresh token with another key's proof: %d %v", st, m)
	}
	if st, m := c.refresh(newest, key.proof("POST", tokenURL, "", time.Now())); st != http.StatusOK {
		t.Errorf("the newest refresh token after a thief's try: %d %v", st, m)
	}
}

// tamperClaims swaps a proof's claims for others, keeping the signature.
func tamperClaims(p string) string {
	parts := strings.Split(p, ".")
	parts[1] = strings.TrimRight(parts[1], "A") + "B"
	return strings.Join(parts, ".")
}
