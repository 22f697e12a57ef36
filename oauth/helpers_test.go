//go:build unix

package oauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

const password = "correct horse battery staple"

// grantCaps are what the operator's grant holds.
var grantCaps = []string{"mcp:echo:*", "docs:read:/project/**", "docs:write:/project/**"}

// asEnv is delegateos serve --authorize in front of the docserver.
type asEnv struct {
	e      *mcptest.Env
	srv    *mcptest.Server
	grant  *dct.Token
	policy *mcptest.Policy
}

// startAS starts serve --authorize with a grant of grantCaps (budget
// 1,000,000 microcents, an hour); mod may change the policy.
func startAS(t *testing.T, mod func(e *mcptest.Env, p *mcptest.Policy), flags ...string) *asEnv {
	t.Helper()
	e := mcptest.NewEnv(t)
	// Depth 3: the consent, each access token, and one token exchange.
	a := &asEnv{e: e, grant: e.Mint(func(p *dct.CreateParams) { p.MaxChainDepth = 3 }, grantCaps...), policy: e.Policy()}
	if mod != nil {
		mod(e, a.policy)
	}
	grantFile := filepath.Join(e.Dir, "grant.tok")
	pwFile := filepath.Join(e.Dir, "consent.pw")
	if err := os.WriteFile(grantFile, []byte(a.grant.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--authorize", "--grant", "@" + grantFile, "--grant-key", e.KeyFile(e.Agent), "--consent-password", "@" + pwFile}, flags...)
	a.srv = e.StartServe(mcptest.ServeOptions{Policy: a.policy, Flags: args})
	return a
}

// oclient is an OAuth client written by hand, to send what the SDKs never
// would.
type oclient struct {
	t        *testing.T
	a        *asEnv
	id       string
	redirect string
	hc       *http.Client
	verifier string
}

func (a *asEnv) register(t *testing.T, name string) *oclient {
	t.Helper()
	redirect := "http://127.0.0.1:9/callback"
	st, body := a.post(t, "/register", "application/json", mcptest.JSON(map[string]any{
		"client_name": name, "redirect_uris": []string{redirect}, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": "none"}), nil)
	if st != http.StatusCreated {
		t.Fatalf("register: HTTP %d %s", st, body)
	}
	jar, _ := cookiejar.New(nil)
	c := &oclient{t: t, a: a, id: body["client_id"].(string), redirect: redirect, verifier: randomVerifier(),
		hc: &http.Client{Jar: jar, Timeout: mcptest.CallTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	return c
}

func randomVerifier() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func challengeOf(verifier string) string {
	d := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(d[:])
}

// post sends a body and reads a JSON answer.
func (a *asEnv) post(t *testing.T, path, ctype, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.srv.Base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{"raw": string(b)}
	}
	return res.StatusCode, m
}

// authorizeParams are a good authorization request's parameters.
func (c *oclient) authorizeParams(scope string) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirect}, "state": {"st-123"},
		"code_challenge": {challengeOf(c.verifier)}, "code_challenge_method": {"S256"}, "scope": {scope},
		"resource": {c.a.srv.URL}}
}

// get sends a GET with the client's cookies, not following redirects.
func (c *oclient) get(q url.Values) (*http.Response, string) {
	c.t.Helper()
	res, err := c.hc.Get(c.a.srv.Base + "/authorize?" + q.Encode())
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var (
	hiddenRequest = regexp.MustCompile(`name="request" value="([0-9a-f]+)"`)
	hiddenCSRF    = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
)

// consentPage opens the consent page and returns its request and CSRF
// fields.
func (c *oclient) consentPage(scope string) (request, csrf string) {
	c.t.Helper()
	res, page := c.get(c.authorizeParams(scope))
	if res.StatusCode != http.StatusOK {
		c.t.Fatalf("authorize: HTTP %d %s %s", res.StatusCode, res.Header.Get("Location"), page)
	}
	m1, m2 := hiddenRequest.FindStringSubmatch(page), hiddenCSRF.FindStringSubmatch(page)
	if m1 == nil || m2 == nil {
		c.t.Fatalf("no consent form in %s", page)
	}
	return m1[1], m2[1]
}

// submit posts the consent form with the client's cookies.
func (c *oclient) submit(form url.Values, hdr map[string]string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.a.srv.Base+"/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func approveForm(request, csrf string, caps ...string) url.Values {
	return url.Values{"request": {request}, "csrf": {csrf}, "password": {password}, "decision": {"approve"},
		"cap": caps, "budget": {"500000"}, "expires_in": {"30"}}
}

// code approves scope (every capability asked for) and returns the code.
func (c *oclient) code(scope string) string {
	c.t.Helper()
	req, csrf := c.consentPage(scope)
	n := len(strings.Fields(scope))
	if n == 0 {
		n = len(grantCaps)
	}
	var idx []string
	for i := 0; i < n; i++ {
		idx = append(idx, fmt.Sprint(i))
	}
	res, body := c.submit(approveForm(req, csrf, idx...), nil)
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || err != nil || loc.Query().Get("code") == "" {
		c.t.Fatalf("consent: HTTP %d %s %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	if loc.Query().Get("state") != "st-123" || loc.Query().Get("iss") != c.a.srv.Base {
		c.t.Fatalf("consent redirect %s: want state and iss", loc)
	}
	return loc.Query().Get("code")
}

// exchange redeems a code.
func (c *oclient) exchange(code string, dpop string) (int, map[string]any) {
	c.t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {c.id}, "redirect_uri": {c.redirect},
		"code_verifier": {c.verifier}, "resource": {c.a.srv.URL}}
	var hdr map[string]string
	if dpop != "" {
		hdr = map[string]string{"DPoP": dpop}
	}
	return c.a.post(c.t, "/token", "application/x-www-form-urlencoded", form.Encode(), hdr)
}

func (c *oclient) refresh(rt, dpop string) (int, map[string]any) {
	c.t.Helper()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {c.id}}
	var hdr map[string]string
	if dpop != "" {
		hdr = map[string]string{"DPoP": dpop}
	}
	return c.a.post(c.t, "/token", "application/x-www-form-urlencoded", form.Encode(), hdr)
}

// tokens runs the whole flow and returns the token response.
func (c *oclient) tokens(scope, dpop string) map[string]any {
	c.t.Helper()
	st, m := c.exchange(c.code(scope), dpop)
	if st != http.StatusOK {
		c.t.Fatalf("token: HTTP %d %v", st, m)
	}
	return m
}

// dpopKey makes DPoP proofs (ES256).
type dpopKey struct{ k *ecdsa.PrivateKey }

func newDPoPKey(t *testing.T) *dpopKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &dpopKey{k}
}

func (d *dpopKey) proof(method, htu, accessToken string, iat time.Time) string {
	return d.proofJTI(method, htu, accessToken, iat, randomVerifier())
}

func (d *dpopKey) proofJTI(method, htu, accessToken string, iat time.Time, jti string) string {
	enc := base64.RawURLEncoding
	pub, _ := d.k.PublicKey.Bytes() // 0x04 || X || Y
	hdr := mcptest.JSON(map[string]any{"typ": "dpop+jwt", "alg": "ES256",
		"jwk": map[string]string{"kty": "EC", "crv": "P-256", "x": enc.EncodeToString(pub[1:33]), "y": enc.EncodeToString(pub[33:])}})
	claims := map[string]any{"jti": jti, "htm": method, "htu": htu, "iat": iat.Unix()}
	if accessToken != "" {
		h := sha256.Sum256([]byte(accessToken))
		claims["ath"] = enc.EncodeToString(h[:])
	}
	signing := enc.EncodeToString([]byte(hdr)) + "." + enc.EncodeToString([]byte(mcptest.JSON(claims)))
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, d.k, digest[:])
	if err != nil {
		panic(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig)
}

// initialize posts an initialize with hdr and returns the HTTP status.
func (a *asEnv) initialize(t *testing.T, hdr map[string]string) *mcptest.HTTPResponse {
	t.Helper()
	return a.srv.Do(http.MethodPost, "/mcp", hdr, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
