package oauth

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
)

// Token exchange (RFC 8693) names.
const (
	GrantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// exchangeToken is the token exchange grant: an agent holding an access
// token this server issued gets an attenuation of it for a sub-agent,
// narrowed to the scope it asks for (and to budget, in microcents, and
// expires_in, in seconds, when given). The new token is a child of the
// subject token in the delegation chain, so it can only be narrower;
// it has no refresh token, and ends with the subject's authorization.
// A DPoP-bound subject token needs a proof made with its key; the new
// token is bound to the request's proof key, if any, else a bearer token.
func (s *Server) exchangeToken(form map[string][]string, proof *Proof, now time.Time) (*tokenResponse, *Error) {
	get := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if t := get("subject_token_type"); t != TokenTypeAccessToken {
		return nil, badRequest(ErrInvalidRequest, "subject_token_type must be "+TokenTypeAccessToken)
	}
	if t := get("requested_token_type"); t != "" && t != TokenTypeAccessToken {
		return nil, badRequest(ErrInvalidRequest, "requested_token_type may only be "+TokenTypeAccessToken)
	}
	if get("actor_token") != "" {
		return nil, badRequest(ErrInvalidRequest, "actor_token is not supported: the new token's holder is a key this server makes, or your DPoP key")
	}
	subject := get("subject_token")
	it := s.issuedToken(subject, now)
	if it == nil || now.After(it.expires) {
		return nil, badRequest(ErrInvalidGrant, "the subject token is not a live access token this server issued")
	}
	if it.jkt != "" && (proof == nil || proof.JKT != it.jkt) {
		return nil, badRequest(ErrInvalidDPoPProof, "the subject token is bound to a DPoP key: send a proof signed with it")
	}
	if oe := s.spendProof(proof, now); oe != nil {
		return nil, oe
	}
	if it.key == nil {
		return nil, badRequest(ErrInvalidRequest, "the subject token is held by your own key: attenuate it yourself (delegateos dct attenuate)")
	}
	if s.cfg.Live != nil {
		if err := s.cfg.Live(subject); err != nil {
			return nil, badRequest(ErrInvalidGrant, "the subject token no longer authorizes: "+err.Error())
		}
	}
	var caps []dct.Capability
	for _, f := range strings.Fields(get("scope")) {
		c, err := dct.ParseCapability(f)
		if err != nil || !slices.ContainsFunc(it.caps, c.SubsetOf) {
			return nil, badRequest(ErrInvalidScope, fmt.Sprintf("scope %q is not within the subject token's", clip(f)))
		}
		caps = append(caps, c)
	}
	if len(caps) == 0 {
		return nil, badRequest(ErrInvalidScope, "give the scope the sub-agent needs: an exchanged token is narrowed to it")
	}
	var budget *int64
	if b := get("budget"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 0 {
			return nil, badRequest(ErrInvalidRequest, "budget must be a whole number of microcents")
		}
		budget = &n
	}
	exp := it.expires
	if e := get("expires_in"); e != "" {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil || n < 1 {
			return nil, badRequest(ErrInvalidRequest, "expires_in must be a number of seconds")
		}
		if d := now.Add(time.Duration(n) * time.Second); d.Before(exp) {
			exp = d
		}
	}
	// Bounded before anything is made or recorded, and again when stored.
	if oe := s.exchangeRoom(it.fam, now); oe != nil {
		return nil, oe
	}
	tok, key, oe := s.attenuate(it.fam, it.token, it.key, proof, caps, budget, exp, now)
	if oe != nil {
		return nil, oe
	}
	jkt, typ := "", "Bearer"
	if proof != nil {
		jkt, typ = proof.JKT, "DPoP"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if it.fam.ended {
		return nil, badRequest(ErrInvalidGrant, "the authorization was ended")
	}
	if oe := s.exchangeRoomLocked(it.fam, now); oe != nil {
		return nil, oe
	}
	h := TokenHash(tok.String())
	s.issued[h] = &issuedToken{jkt: jkt, expires: exp, fam: it.fam, token: tok, key: key, caps: caps}
	it.fam.access = append(it.fam.access, h)
	it.fam.exchanged = append(it.fam.exchanged, h)
	s.log.Info("oauth token exchanged", zap.String("client_id", it.fam.clientID), zap.String("delegation", it.fam.consent.delegationID),
		zap.Strings("capabilities", capStrings(caps)), zap.String("expires", formatTime(exp)))
	return &tokenResponse{AccessToken: tok.String(), TokenType: typ, ExpiresIn: int64(exp.Sub(now) / time.Second),
		Scope: strings.Join(capStrings(caps), " "), IssuedTokenType: TokenTypeAccessToken}, nil
}

// exchangeRoom refuses an exchange when the approval already has
// MaxExchangedPerFamily live exchanged tokens, or the server MaxIssued
// live access tokens (expired ones are forgotten first).
func (s *Server) exchangeRoom(fam *family, now time.Time) *Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exchangeRoomLocked(fam, now)
}

func (s *Server) exchangeRoomLocked(fam *family, now time.Time) *Error {
	fam.exchanged = slices.DeleteFunc(fam.exchanged, func(h string) bool {
		it := s.issued[h]
		return it == nil || now.After(it.expires)
	})
	if len(fam.exchanged) >= MaxExchangedPerFamily {
		return oerr(http.StatusTooManyRequests, ErrInvalidRequest, fmt.Sprintf("this authorization already has %d live exchanged tokens: wait until some expire (give them a shorter expires_in)", MaxExchangedPerFamily))
	}
	s.sweepIssuedLocked(now)
	if len(s.issued) >= MaxIssued {
		return oerr(http.StatusServiceUnavailable, ErrTemporarily, "too many live access tokens")
	}
	return nil
}

// sweepIssuedLocked forgets the expired access tokens when the server
// holds MaxIssued.
func (s *Server) sweepIssuedLocked(now time.Time) {
	if len(s.issued) < MaxIssued {
		return
	}
	for h, it := range s.issued {
		if now.After(it.expires) {
			delete(s.issued, h)
		}
	}
}
