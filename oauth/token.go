package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
)

// authCode is an authorization code: single use, CodeTTL, bound to its
// client, redirect URI, PKCE challenge and resource.
type authCode struct {
	clientID, redirect, challenge, resource string
	consent                                 *consent
	expires                                 time.Time
	used                                    bool
	family                                  *family // once exchanged
}

// family is one approval's tokens: its consent delegation, its refresh
// tokens (one live at a time) and the access tokens issued from it.
type family struct {
	id       string
	clientID string
	client   string // its name, for the record
	consent  *consent
	jkt      string // the DPoP key it is bound to, "" for bearer
	ended    bool
	refresh  []string // hashes of its last refresh tokens issued, the last live
	gen      int      // refresh tokens issued (the live one's generation is gen-1)
	access   []string // hashes of the access tokens issued
	// exchanged are the hashes of its access tokens made by token
	// exchange (at most MaxExchangedPerFamily live).
	exchanged []string
}

type refreshEntry struct{ fam *family }

// maxRotated is how many of a family's rotated refresh tokens are kept
// to recognize a reuse.
const maxRotated = 64

// issuedToken is an access token this process issued.
type issuedToken struct {
	jkt     string
	expires time.Time
	fam     *family
	token   *dct.Token
	// key is the token's holder key, which this server made and keeps for
	// token exchange; nil when the client's own DPoP key holds it.
	key  *identity.Keypair
	caps []dct.Capability
}

// newCode stores an authorization code for an approval.
func (s *Server) newCode(p *pendingReq, c *consent, now time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ac := range s.codes {
		if now.After(ac.expires) {
			delete(s.codes, k)
		}
	}
	if len(s.codes) >= MaxCodes {
		return "", errors.New("too many approvals are waiting for their application: try again in a minute")
	}
	code := randomHex(32)
	s.codes[code] = &authCode{clientID: p.client.ID, redirect: p.redirect, challenge: p.challenge, resource: p.resource,
		consent: c, expires: now.Add(CodeTTL)}
	return code, nil
}

// tokenResponse is the token endpoint's answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
	// IssuedTokenType is set on a token exchange's answer (RFC 8693).
	IssuedTokenType string `json:"issued_token_type,omitempty"`
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if allowCORS(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		oerr(http.StatusMethodNotAllowed, ErrInvalidRequest, "use POST").write(w)
		return
	}
	body, oe := readBody(w, r, MaxFormBytes, "application/x-www-form-urlencoded")
	if oe != nil {
		oe.write(w)
		return
	}
	form, err := ParseForm(body)
	if err != nil || len(form["cap"]) > 1 {
		badRequest(ErrInvalidRequest, "the form cannot be read, or gives a parameter twice").write(w)
		return
	}
	now := s.cfg.Now()
	proof, oe := s.tokenProof(r, now)
	if oe != nil {
		oe.write(w)
		return
	}
	var res *tokenResponse
	switch form.Get("grant_type") {
	case "authorization_code":
		res, oe = s.exchangeCode(form, r, proof, now)
	case "refresh_token":
		res, oe = s.refreshGrant(form, proof, now)
	case GrantTokenExchange:
		res, oe = s.exchangeToken(form, proof, now)
	case "":
		oe = badRequest(ErrInvalidRequest, "grant_type is required")
	default:
		oe = badRequest(ErrUnsupportedGrantType, "grant_type must be authorization_code, refresh_token or "+GrantTokenExchange)
	}
	if oe != nil {
		s.log.Info("oauth token refused", zap.String("client_id", form.Get("client_id")), zap.String("error", oe.Code), zap.String("detail", oe.Description))
		oe.write(w)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// tokenProof checks the DPoP proof a token request offers, if any (its
// jti is spent by spendProof).
func (s *Server) tokenProof(r *http.Request, now time.Time) (*Proof, *Error) {
	vals := r.Header.Values(HeaderDPoP)
	switch len(vals) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, badRequest(ErrInvalidDPoPProof, "more than one DPoP header")
	}
	p, err := ParseDPoP(vals[0])
	if err == nil {
		err = p.Check(DPoPCheck{Method: r.Method, URL: issuer(r) + PathToken, Now: now})
	}
	if err != nil {
		return nil, badRequest(ErrInvalidDPoPProof, err.Error())
	}
	return p, nil
}

// spendProof records a token request's proof against replay, once the
// request's grant has checked out: anyone can make proofs with keys of
// their own, so only a request holding a code, a refresh token or an
// access token may fill the replay cache.
func (s *Server) spendProof(p *Proof, now time.Time) *Error {
	if p == nil {
		return nil
	}
	if err := s.jtis.use(p, now); err != nil {
		return badRequest(ErrInvalidDPoPProof, err.Error())
	}
	return nil
}

// exchangeCode is the authorization_code grant. A code is burnt by its
// first presentation, whatever comes of it; presenting it again ends the
// tokens it was exchanged for (RFC 6749 §4.1.2).
func (s *Server) exchangeCode(form map[string][]string, r *http.Request, proof *Proof, now time.Time) (*tokenResponse, *Error) {
	get := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	s.mu.Lock()
	ac := s.codes[get("code")]
	if ac == nil || now.After(ac.expires) {
		s.mu.Unlock()
		return nil, badRequest(ErrInvalidGrant, "the code is unknown or expired")
	}
	if ac.used {
		fam := ac.family
		s.mu.Unlock()
		if fam != nil {
			s.endFamily(fam, "its authorization code was presented again")
		}
		return nil, badRequest(ErrInvalidGrant, "the code was used before: the tokens issued for it are ended")
	}
	ac.used = true
	s.mu.Unlock()
	switch {
	case get("client_id") != ac.clientID:
		return nil, badRequest(ErrInvalidGrant, "the code was issued to another client")
	case get("redirect_uri") != ac.redirect:
		return nil, badRequest(ErrInvalidGrant, "redirect_uri is not the one the code was issued for")
	case !verifierMatches(get("code_verifier"), ac.challenge):
		return nil, badRequest(ErrInvalidGrant, "code_verifier does not match the code_challenge")
	}
	if res := get("resource"); res != "" && res != ac.resource {
		return nil, badRequest(ErrInvalidTarget, "resource is not the one the code was issued for")
	}
	if oe := s.spendProof(proof, now); oe != nil {
		return nil, oe
	}
	c := s.clients.get(ac.clientID)
	if c == nil {
		return nil, oerr(http.StatusUnauthorized, ErrInvalidClient, "the client is no longer registered")
	}
	fam := &family{id: randomHex(16), clientID: c.ID, client: c.Reg.ClientName, consent: ac.consent}
	if proof != nil {
		fam.jkt = proof.JKT
	}
	if !s.addFamily(fam, now) {
		return nil, oerr(http.StatusServiceUnavailable, ErrTemporarily, "too many approvals hold live tokens")
	}
	s.mu.Lock()
	ac.family = fam
	s.mu.Unlock()
	return s.issue(fam, proof, nil, now)
}

// verifierMatches checks a PKCE code verifier (RFC 7636 §4.1: 43 to 128
// unreserved characters) against an S256 challenge.
func verifierMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for i := 0; i < len(verifier); i++ {
		c := verifier[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	d := sha256.Sum256([]byte(verifier))
	return equalSecret(b64.Encode(d[:]), challenge)
}

// refreshGrant is the refresh_token grant: the refresh token rotates, and
// presenting one already rotated ends its family (it was stolen, or the
// client is confused: either way nobody keeps its tokens).
func (s *Server) refreshGrant(form map[string][]string, proof *Proof, now time.Time) (*tokenResponse, *Error) {
	get := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	rt := get("refresh_token")
	h := TokenHash(rt)
	s.mu.Lock()
	var fam *family
	live := false
	if e := s.refresh[h]; e != nil {
		fam = e.fam
		live = fam.refresh[len(fam.refresh)-1] == h
	} else if f := s.rotatedLocked(rt); f != nil {
		// One of its older tokens, no longer kept: a reuse all the same.
		fam = f
	}
	if fam == nil || fam.ended {
		s.mu.Unlock()
		return nil, badRequest(ErrInvalidGrant, "the refresh token is unknown or ended")
	}
	s.mu.Unlock()
	// A DPoP-bound refresh token is worth nothing without its key: one
	// presented without a proof by that key is refused before anything
	// else, so that whoever stole it cannot even end its family.
	if fam.jkt != "" && (proof == nil || proof.JKT != fam.jkt) {
		return nil, badRequest(ErrInvalidDPoPProof, "the refresh token is bound to a DPoP key: send a proof signed with it")
	}
	if !live {
		s.endFamily(fam, "a rotated refresh token was presented again")
		return nil, badRequest(ErrInvalidGrant, "the refresh token was used before: every token of this authorization is ended")
	}
	if get("client_id") != fam.clientID {
		return nil, badRequest(ErrInvalidGrant, "the refresh token was issued to another client")
	}
	if oe := s.spendProof(proof, now); oe != nil {
		return nil, oe
	}
	if now.After(fam.consent.expires) {
		s.endFamily(fam, "its delegation expired")
		return nil, badRequest(ErrInvalidGrant, "the authorization expired")
	}
	if s.cfg.Live != nil {
		if err := s.cfg.Live(fam.consent.token.String()); err != nil {
			s.endFamily(fam, "its delegation no longer authorizes: "+err.Error())
			return nil, badRequest(ErrInvalidGrant, "the authorization was revoked or has ended: "+err.Error())
		}
	}
	var narrow []dct.Capability
	if sc := get("scope"); sc != "" {
		for _, f := range strings.Fields(sc) {
			c, err := dct.ParseCapability(f)
			if err != nil || !slices.ContainsFunc(fam.consent.caps, c.SubsetOf) {
				return nil, badRequest(ErrInvalidScope, fmt.Sprintf("scope %q is not within what was approved", clip(f)))
			}
			narrow = append(narrow, c)
		}
	}
	return s.issue(fam, proof, narrow, now)
}

// rotatedLocked is the family of a refresh token that names a live
// family (its ID is a secret only its refresh tokens carry) and a
// generation before the family's live one: a token rotated so long ago
// that its hash is no longer kept. Nil for any other.
func (s *Server) rotatedLocked(rt string) *family {
	id, rest, ok := strings.Cut(rt, ".")
	if !ok {
		return nil
	}
	g, _, ok := strings.Cut(rest, ".")
	if !ok {
		return nil
	}
	gen, err := strconv.Atoi(g)
	f := s.families[id]
	if err != nil || f == nil || gen < 0 || gen >= f.gen-1 || strconv.Itoa(gen) != g {
		return nil
	}
	return f
}

func (s *Server) addFamily(fam *family, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.families) >= MaxFamilies {
		for id, f := range s.families {
			if f.ended || now.After(f.consent.expires) {
				s.forgetFamilyLocked(f)
				delete(s.families, id)
			}
		}
		if len(s.families) >= MaxFamilies {
			return false
		}
	}
	s.families[fam.id] = fam
	return true
}

// endFamily ends an approval's tokens: its refresh tokens are refused, and
// so are its access tokens (Protect refuses a token of the grant this
// process does not know).
func (s *Server) endFamily(fam *family, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fam.ended {
		return
	}
	fam.ended = true
	for _, h := range fam.access {
		delete(s.issued, h)
	}
	s.log.Warn("oauth tokens ended", zap.String("client_id", fam.clientID), zap.String("delegation", fam.consent.delegationID), zap.String("reason", why))
}

func (s *Server) forgetFamilyLocked(f *family) {
	for _, h := range f.refresh {
		delete(s.refresh, h)
	}
	for _, h := range f.access {
		delete(s.issued, h)
	}
}

// issue mints an access token for a family, and a new refresh token: the
// consent delegation attenuated to the DPoP key (an Ed25519 one) or to a
// key nobody keeps, for BearerTTL or DPoPTTL, never past the consent.
func (s *Server) issue(fam *family, proof *Proof, narrow []dct.Capability, now time.Time) (*tokenResponse, *Error) {
	ttl, typ := BearerTTL, "Bearer"
	if fam.jkt != "" {
		ttl, typ = DPoPTTL, "DPoP"
	}
	exp := now.Add(ttl)
	if exp.After(fam.consent.expires) {
		exp = fam.consent.expires
	}
	caps := fam.consent.caps
	if narrow != nil {
		caps = narrow
	}
	tok, key, oe := s.attenuate(fam, fam.consent.token, fam.consent.key, proof, narrow, nil, exp, now)
	if oe != nil {
		return nil, oe
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fam.ended {
		return nil, badRequest(ErrInvalidGrant, "the authorization was ended")
	}
	// A refresh token names its family and generation, so that any older
	// one is known as a reuse however many rotations ago it was issued.
	refresh := fam.id + "." + strconv.Itoa(fam.gen) + "." + b64.Encode(randomBytes(32))
	s.sweepIssuedLocked(now)
	if len(s.issued) >= MaxIssued {
		return nil, oerr(http.StatusServiceUnavailable, ErrTemporarily, "too many live access tokens")
	}
	ah, rh := TokenHash(tok.String()), TokenHash(refresh)
	s.issued[ah] = &issuedToken{jkt: fam.jkt, expires: exp, fam: fam, token: tok, key: key, caps: caps}
	fam.access = append(fam.access, ah)
	s.refresh[rh] = &refreshEntry{fam: fam}
	fam.refresh = append(fam.refresh, rh)
	fam.gen++
	// A family that refreshes for ever keeps its last rotated tokens for
	// reuse detection, and its access tokens that have not expired.
	if n := len(fam.refresh) - maxRotated; n > 0 {
		for _, old := range fam.refresh[:n] {
			delete(s.refresh, old)
		}
		fam.refresh = slices.Delete(fam.refresh, 0, n)
	}
	fam.access = slices.DeleteFunc(fam.access, func(h string) bool {
		if it := s.issued[h]; it == nil || now.After(it.expires) {
			delete(s.issued, h)
			return true
		}
		return false
	})
	s.log.Info("oauth token issued", zap.String("client_id", fam.clientID), zap.String("token_type", typ),
		zap.String("delegation", fam.consent.delegationID), zap.String("expires", formatTime(exp)))
	return &tokenResponse{AccessToken: tok.String(), TokenType: typ, ExpiresIn: int64(exp.Sub(now) / time.Second),
		RefreshToken: refresh, Scope: strings.Join(capStrings(caps), " ")}, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}

// attenuate makes and records a token: parent attenuated by parentKey for
// a holder (the proof's Ed25519 key, else a key this server makes and
// keeps, returned), narrowed to caps and budget when given, until exp.
func (s *Server) attenuate(fam *family, parent *dct.Token, parentKey *identity.Keypair, proof *Proof, caps []dct.Capability, budget *int64, exp time.Time, now time.Time) (*dct.Token, *identity.Keypair, *Error) {
	var holder string
	var key *identity.Keypair
	if proof != nil && proof.Ed25519 != nil && !identity.SmallOrder(proof.Ed25519) {
		holder = identity.PrincipalID(proof.Ed25519)
	} else {
		k, err := identity.Generate(rand.Reader, "oauth-holder")
		if err != nil {
			return nil, nil, oerr(http.StatusInternalServerError, ErrServerError, "no key")
		}
		holder, key = k.ID(), k
	}
	p := dct.AttenuateParams{Attenuator: parentKey, Delegatee: holder, DelegationID: newDelegationID(), ExpiresAt: &exp,
		MaxBudgetMicrocents: budget, Now: now}
	if caps != nil {
		p.Capabilities = &caps
	}
	tok, err := dct.Attenuate(parent, p)
	if err != nil {
		// Fail closed: what cannot be an attenuation is not issued.
		return nil, nil, badRequest(ErrInvalidRequest, "the token cannot be made: "+err.Error())
	}
	if s.cfg.Record != nil {
		if err := s.cfg.Record(tok, fam.client); err != nil {
			s.log.Error("oauth token not issued: it cannot be recorded", zap.Error(err))
			return nil, nil, oerr(http.StatusInternalServerError, ErrServerError, "the delegation cannot be recorded: "+err.Error())
		}
	}
	return tok, key, nil
}
