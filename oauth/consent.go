package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// pendingReq is an authorization request waiting on the consent page.
type pendingReq struct {
	id, csrf                             string
	client                               *client
	redirect, state, challenge, resource string
	caps                                 []dct.Capability // asked for (the grant's when no scope)
	created                              time.Time
	failures                             int // wrong passwords on its page
}

// lockout bounds guesses of the consent password. Each consent page
// (pending request) takes ConsentFailures wrong passwords, then is
// forgotten: a stranger who guesses on its own page burns only that page,
// never the operator's. Across pages, once ConsentGlobalFailures wrong
// passwords came within ConsentLockout, each password is checked only
// ConsentPace after the one before (the right one too, but it passes when
// its turn comes): guesses are slowed, nobody is locked out.
type lockout struct {
	mu     sync.Mutex
	recent []time.Time // wrong passwords, oldest first, within ConsentLockout
	next   time.Time   // when paced, the earliest time of the next check
}

// turn is how long a password check must wait for its turn.
func (l *lockout) turn(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recent = slices.DeleteFunc(l.recent, func(t time.Time) bool { return now.Sub(t) >= ConsentLockout })
	if len(l.recent) < ConsentGlobalFailures {
		return 0
	}
	t := l.next
	if t.Before(now) {
		t = now
	}
	l.next = t.Add(ConsentPace)
	return t.Sub(now)
}

func (l *lockout) fail(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent) >= 4*ConsentGlobalFailures {
		l.recent = l.recent[1:]
	}
	l.recent = append(l.recent, now)
}

// pkceChallenge is an S256 code challenge: base64url of 32 bytes.
var pkceChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// serveAuthorize shows the consent page (GET) or takes its answer (POST).
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.authorizeRequest(w, r)
	case http.MethodPost:
		s.consentAnswer(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.errorPage(w, http.StatusMethodNotAllowed, "Use GET or POST.")
	}
}

// authorizeRequest checks an authorization request. Until the client and
// its redirect URI are known good, a refusal is a page here (never a
// redirect: that would be an open redirector); after, it is an error sent
// back to the client's redirect URI.
func (s *Server) authorizeRequest(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k, v := range q {
		if len(v) > 1 {
			s.errorPage(w, http.StatusBadRequest, "The request gives "+k+" more than once.")
			return
		}
	}
	c := s.clients.get(q.Get("client_id"))
	if c == nil {
		s.errorPage(w, http.StatusBadRequest, "Unknown client_id: the application is not registered here (or was forgotten when the server restarted). Start again from the application.")
		return
	}
	redirect := q.Get("redirect_uri")
	if !slices.Contains(c.Reg.RedirectURIs, redirect) {
		s.errorPage(w, http.StatusBadRequest, "The redirect_uri is not one the application registered: refused, so that nothing is sent anywhere else.")
		return
	}
	state := q.Get("state")
	back := func(code, desc string) {
		s.log.Info("oauth authorization refused", zap.String("client_id", c.ID), zap.String("error", code), zap.String("detail", desc))
		http.Redirect(w, r, withParams(redirect, url.Values{"error": {code}, "error_description": {desc}, "state": {state}, "iss": {issuer(r)}}), http.StatusSeeOther)
	}
	switch {
	case q.Get("response_type") != "code":
		back(ErrUnsupportedResponse, "response_type must be code")
		return
	case state == "":
		back(ErrInvalidRequest, "state is required")
		return
	case q.Get("code_challenge_method") != "S256":
		back(ErrInvalidRequest, "PKCE is required with code_challenge_method S256 (plain is not accepted)")
		return
	case !pkceChallenge.MatchString(q.Get("code_challenge")):
		back(ErrInvalidRequest, "code_challenge must be the base64url SHA-256 of the code verifier (43 characters)")
		return
	}
	if res := q.Get("resource"); res != "" && res != s.resource(r) {
		back(ErrInvalidTarget, "this server issues tokens for "+s.resource(r)+" only")
		return
	}
	caps, err := s.parseScope(q.Get("scope"))
	if err != nil {
		back(ErrInvalidScope, err.Error())
		return
	}
	p := &pendingReq{id: randomHex(16), csrf: randomHex(32), client: c, redirect: redirect, state: state,
		challenge: q.Get("code_challenge"), resource: s.resource(r), caps: caps, created: s.cfg.Now()}
	s.addPending(p)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie(p.id), Value: p.csrf, Path: PathAuthorize, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int(PendingTTL / time.Second)})
	s.consentPage(w, http.StatusOK, p, "")
}

func csrfCookie(id string) string { return "dos_consent_" + id[:16] }

// parseScope reads a scope parameter as capabilities, each of which the
// grant must cover: a scope the grant does not hold fails the request,
// it is not quietly dropped. No scope asks for the whole grant.
func (s *Server) parseScope(scope string) ([]dct.Capability, error) {
	fields := strings.Fields(scope)
	if len(fields) == 0 {
		return slices.Clone(s.cfg.GrantScope.Capabilities), nil
	}
	if len(fields) > MaxScopes {
		return nil, fmt.Errorf("more than %d scopes", MaxScopes)
	}
	var caps []dct.Capability
	for _, f := range fields {
		c, err := dct.ParseCapability(f)
		if err != nil {
			return nil, fmt.Errorf("scope %q is not a capability (namespace:action:resource)", clip(f))
		}
		if !s.grantCovers(c) {
			return nil, fmt.Errorf("scope %q is not within what this server may grant", clip(f))
		}
		if !slices.Contains(caps, c) {
			caps = append(caps, c)
		}
	}
	return caps, nil
}

func (s *Server) grantCovers(c dct.Capability) bool {
	return slices.ContainsFunc(s.cfg.GrantScope.Capabilities, c.SubsetOf)
}

func (s *Server) addPending(p *pendingReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	s.porder = slices.DeleteFunc(s.porder, func(id string) bool {
		q := s.pending[id]
		if q == nil || now.Sub(q.created) > PendingTTL {
			delete(s.pending, id)
			return true
		}
		return false
	})
	// A client's own oldest page makes way for its new one; when all are
	// taken, the oldest page of the client with the most goes: another
	// client's requests never close a page while the flooder has more.
	count := map[*client]int{}
	for _, id := range s.porder {
		count[s.pending[id].client]++
	}
	for count[p.client] >= MaxPendingPerClient || len(s.porder) >= MaxPending {
		victim := p.client
		if count[victim] < MaxPendingPerClient {
			victim = nil
			for c, n := range count {
				if c != p.client && (victim == nil || n > count[victim]) {
					victim = c
				}
			}
		}
		// Its oldest page (porder is oldest first).
		i := slices.IndexFunc(s.porder, func(id string) bool { return s.pending[id].client == victim })
		delete(s.pending, s.porder[i])
		s.porder = slices.Delete(s.porder, i, i+1)
		count[victim]--
	}
	s.pending[p.id] = p
	s.porder = append(s.porder, p.id)
}

// takePending looks up a pending request (nil when unknown or expired).
func (s *Server) getPending(id string) *pendingReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[id]
	if p == nil || s.cfg.Now().Sub(p.created) > PendingTTL {
		return nil
	}
	return p
}

// failPending counts a wrong password on p, and forgets p (true) at the
// ConsentFailures-th.
func (s *Server) failPending(p *pendingReq) bool {
	s.mu.Lock()
	p.failures++
	burnt := p.failures >= ConsentFailures
	s.mu.Unlock()
	if burnt {
		s.dropPending(p.id)
	}
	return burnt
}

func (s *Server) dropPending(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, id)
	s.porder = slices.DeleteFunc(s.porder, func(x string) bool { return x == id })
}

// consentAnswer takes the consent form: CSRF token (in the form and in
// the request's own cookie), the consent password (constant-time compare;
// the page is forgotten after ConsentFailures wrong ones, see lockout), and what was approved, which
// can only narrow what was asked for.
func (s *Server) consentAnswer(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && o != "null" && o != issuer(r) {
		s.errorPage(w, http.StatusForbidden, "The consent form was sent from another site: refused.")
		return
	}
	body, oe := readBody(w, r, MaxFormBytes, "application/x-www-form-urlencoded")
	if oe != nil {
		s.errorPage(w, oe.status, "The consent form could not be read: "+oe.Description)
		return
	}
	form, err := ParseForm(body)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The consent form could not be read: "+err.Error())
		return
	}
	p := s.getPending(form.Get("request"))
	if p == nil {
		s.errorPage(w, http.StatusBadRequest, "This consent page has expired or was already answered. Start again from the application.")
		return
	}
	ck, _ := r.Cookie(csrfCookie(p.id))
	if ck == nil || !equalSecret(ck.Value, p.csrf) || !equalSecret(form.Get("csrf"), p.csrf) {
		s.log.Warn("oauth consent refused: CSRF token missing or wrong", zap.String("client_id", p.client.ID))
		s.errorPage(w, http.StatusForbidden, "The consent form's security token is missing or wrong (was it sent from another page?). Reload the application's sign-in.")
		return
	}
	now := s.cfg.Now()
	if d := s.lock.turn(now); d > 0 {
		if d > ConsentMaxWait {
			w.Header().Set("Retry-After", strconv.Itoa(int(d/time.Second)+1))
			s.consentPage(w, http.StatusTooManyRequests, p, fmt.Sprintf("Many wrong passwords were tried: sign-in is slowed; try again in %d seconds.", int(d/time.Second)+1))
			return
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	if !equalSecret(form.Get("password"), s.cfg.ConsentPassword) {
		s.lock.fail(now)
		if s.failPending(p) {
			s.log.Warn("oauth consent refused: wrong consent password; the consent page is forgotten", zap.String("client_id", p.client.ID))
			s.errorPage(w, http.StatusUnauthorized, fmt.Sprintf("Wrong consent password, %d times on this page: it is closed. Start again from the application.", ConsentFailures))
			return
		}
		s.log.Warn("oauth consent refused: wrong consent password", zap.String("client_id", p.client.ID))
		s.consentPage(w, http.StatusUnauthorized, p, "Wrong consent password.")
		return
	}
	back := func(q url.Values) {
		s.dropPending(p.id)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie(p.id), Value: "", Path: PathAuthorize, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
		q.Set("state", p.state)
		q.Set("iss", issuer(r))
		http.Redirect(w, r, withParams(p.redirect, q), http.StatusSeeOther)
	}
	if form.Get("decision") != "approve" {
		s.log.Info("oauth consent denied", zap.String("client_id", p.client.ID))
		back(url.Values{"error": {ErrAccessDenied}, "error_description": {"the request was denied on the consent page"}})
		return
	}
	approved, err := s.approved(p, form, now)
	if err != nil {
		s.consentPage(w, http.StatusBadRequest, p, err.Error())
		return
	}
	code, err := s.newCode(p, approved, now)
	if err != nil {
		s.consentPage(w, http.StatusServiceUnavailable, p, err.Error())
		return
	}
	s.clients.approve(p.client.ID)
	s.log.Info("oauth consent approved", zap.String("client_id", p.client.ID), zap.String("client_name", p.client.Reg.ClientName),
		zap.String("delegation", approved.delegationID), zap.String("revocation_id", approved.revocationID),
		zap.Strings("capabilities", capStrings(approved.caps)), zap.Int64("budget", approved.budget), zap.String("expires", formatTime(approved.expires)))
	back(url.Values{"code": {code}})
}

// consent is what was approved, as the consent delegation that carries it.
type consent struct {
	caps                       []dct.Capability
	budget                     int64
	expires                    time.Time
	token                      *dct.Token // the grant attenuated to key
	key                        *identity.Keypair
	delegationID, revocationID string
}

// approved reads what the form approves and makes its consent delegation:
// the capabilities ticked (a subset of those asked for), a budget and an
// expiry within the grant's.
func (s *Server) approved(p *pendingReq, form url.Values, now time.Time) (*consent, error) {
	var caps []dct.Capability
	for _, v := range form["cap"] {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= len(p.caps) {
			return nil, fmt.Errorf("a ticked capability is not one asked for")
		}
		if !slices.Contains(caps, p.caps[i]) {
			caps = append(caps, p.caps[i])
		}
	}
	if len(caps) == 0 {
		return nil, fmt.Errorf("tick at least one capability, or deny")
	}
	budget, err := strconv.ParseInt(strings.TrimSpace(form.Get("budget")), 10, 64)
	if err != nil || budget < 0 || budget > s.grantBudget {
		return nil, fmt.Errorf("the budget must be a whole number of microcents from 0 to %d", s.grantBudget)
	}
	maxMin := s.maxMinutes(now)
	mins, err := strconv.ParseInt(strings.TrimSpace(form.Get("expires_in")), 10, 64)
	if err != nil || mins < 1 || mins > maxMin {
		return nil, fmt.Errorf("the expiry must be 1 to %d minutes from now", maxMin)
	}
	expires := now.Add(time.Duration(mins) * time.Minute)
	if expires.After(s.grantExpiry) {
		expires = s.grantExpiry
	}
	key, err := identity.Generate(rand.Reader, "oauth-consent")
	if err != nil {
		return nil, err
	}
	id := newDelegationID()
	tok, err := dct.Attenuate(s.cfg.Grant, dct.AttenuateParams{Attenuator: s.cfg.GrantKey, Delegatee: key.ID(), DelegationID: id,
		ContractID: consentContract(s.cfg.GrantScope.ContractID), Capabilities: &caps, MaxBudgetMicrocents: &budget, ExpiresAt: &expires, Now: now})
	if err != nil {
		// Fail closed: what cannot be an attenuation is not issued.
		return nil, fmt.Errorf("this approval cannot be issued: %v", err)
	}
	ids := tok.RevocationIDs()
	return &consent{caps: caps, budget: budget, expires: expires, token: tok, key: key, delegationID: id, revocationID: ids[len(ids)-1]}, nil
}

func (s *Server) maxMinutes(now time.Time) int64 {
	return max(int64(s.grantExpiry.Sub(now)/time.Minute), 0)
}

func capStrings(caps []dct.Capability) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = c.String()
	}
	return out
}

func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// withParams adds query parameters to a redirect URI, keeping its own.
func withParams(uri string, q url.Values) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	have := u.Query()
	for k, v := range q {
		if len(v) == 1 && v[0] == "" {
			continue
		}
		have[k] = v
	}
	u.RawQuery = have.Encode()
	return u.String()
}

// ParseForm reads an application/x-www-form-urlencoded body strictly: a
// parameter may be given once, except cap (the consent form's ticked
// capabilities).
func ParseForm(body []byte) (url.Values, error) {
	if len(body) > MaxFormBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFormBytes)
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range v {
		if len(vs) > 1 && k != "cap" {
			return nil, fmt.Errorf("%s is given more than once", clip(k))
		}
		if len(vs) > MaxScopes {
			return nil, fmt.Errorf("%s is given more than %d times", clip(k), MaxScopes)
		}
	}
	return v, nil
}

// securePage sets the headers of every page: no framing (clickjacking of
// the approve button), no scripts, forms only to here and, for the
// consent form's redirect, to the client's redirect origin; not cached,
// no referrer.
func securePage(w http.ResponseWriter, formTo string) {
	h := w.Header()
	csp := "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
	if formTo != "" {
		csp += " " + formTo
	}
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
}

func origin(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

type capRow struct {
	Index                       int
	Namespace, Action, Resource string
}

func (s *Server) consentPage(w http.ResponseWriter, status int, p *pendingReq, problem string) {
	securePage(w, origin(p.redirect))
	w.WriteHeader(status)
	now := s.cfg.Now()
	rows := make([]capRow, len(p.caps))
	for i, c := range p.caps {
		rows[i] = capRow{i, c.Namespace, c.Action, c.Resource}
	}
	maxMin := s.maxMinutes(now)
	name := p.client.Reg.ClientName
	if name == "" {
		name = "(unnamed client)"
	}
	consentTemplate.Execute(w, map[string]any{
		"Client": name, "ClientID": p.client.ID, "Redirect": p.redirect, "Caps": rows,
		"Budget": s.grantBudget, "MaxBudget": s.grantBudget, "Dollars": fmt.Sprintf("%.2f", float64(s.grantBudget)/1e8),
		"Expires": min(maxMin, 24*60), "MaxExpires": maxMin, "GrantExpires": s.grantExpiry.UTC().Format(time.RFC3339),
		"Request": p.id, "CSRF": p.csrf, "Problem": problem, "Resource": p.resource,
	})
}

func (s *Server) errorPage(w http.ResponseWriter, status int, msg string) {
	securePage(w, "")
	w.WriteHeader(status)
	errorTemplate.Execute(w, msg)
}

const pageStyle = `<style>body{font-family:system-ui,sans-serif;max-width:40em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse}td,th{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left}
.problem{color:#a00;font-weight:bold}code{background:#f4f4f4;padding:0 .2em}label{display:block;margin:.6em 0}</style>`

var consentTemplate = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize {{.Client}} — delegateos</title>` + pageStyle + `</head>
<body>
<h1>Authorize an application</h1>
<p><strong id="client-name">{{.Client}}</strong> (client <code>{{.ClientID}}</code>) asks for a delegation to call
<code>{{.Resource}}</code>. After you approve, you are sent back to <code id="redirect">{{.Redirect}}</code>.</p>
{{if .Problem}}<p class="problem" id="problem">{{.Problem}}</p>{{end}}
<form method="post" action="/authorize" id="consent">
<input type="hidden" name="request" value="{{.Request}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<h2>Capabilities</h2>
<p>Untick any you do not want to give.</p>
<table><tr><th></th><th>namespace</th><th>action</th><th>resource</th></tr>
{{range .Caps}}<tr><td><input type="checkbox" name="cap" value="{{.Index}}" id="cap{{.Index}}" checked></td>
<td>{{.Namespace}}</td><td>{{.Action}}</td><td><code>{{.Resource}}</code></td></tr>
{{end}}</table>
<label>Budget, in microcents (at most {{.MaxBudget}}, about ${{.Dollars}}):
<input type="number" name="budget" id="budget" min="0" max="{{.MaxBudget}}" value="{{.Budget}}"></label>
<label>Expires in, minutes (at most {{.MaxExpires}}: the grant ends {{.GrantExpires}}):
<input type="number" name="expires_in" id="expires_in" min="1" max="{{.MaxExpires}}" value="{{.Expires}}"></label>
<h2>Sign in</h2>
<label>Consent password: <input type="password" name="password" id="password" autocomplete="current-password" required></label>
<button type="submit" name="decision" value="approve" id="approve">Approve</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>
</body></html>
`))

var errorTemplate = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorization refused — delegateos</title>` + pageStyle + `</head>
<body><h1>Authorization refused</h1><p class="problem" id="problem">{{.}}</p></body></html>
`))
