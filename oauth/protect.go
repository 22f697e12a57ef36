package oauth

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
)

// Protect wraps the handler of the MCP endpoint. Every 401 it answers
// gets a challenge naming the resource metadata (RFC 9728 §5.1). A token
// sent as "Authorization: DPoP" must come with a proof made with the key
// it is bound to (RFC 9449 §7), and is then passed on as a Bearer token;
// a bound token sent as Bearer is refused; a token attenuated from the
// grant, or issued by any authorization server (another gate's for its
// own resource, say), that this process did not issue, or whose
// authorization ended, is refused.
func (s *Server) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != s.cfg.Endpoint || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		if e := s.checkResource(r); e != nil {
			scheme := "Bearer"
			if e.dpop {
				scheme = "DPoP"
			}
			w.Header().Set("WWW-Authenticate", scheme+` error="`+e.Code+`", error_description="`+quoteSafe(e.Description)+`", resource_metadata="`+s.resourceMetadataURL(r)+`"`)
			if r.ContentLength != 0 {
				w.Header().Set("Connection", "close")
			}
			s.log.Warn("oauth: request refused", zap.String("error", e.Code), zap.String("detail", e.Description))
			e.write(w)
			return
		}
		next.ServeHTTP(&challengeWriter{ResponseWriter: w, s: s, r: r}, r)
	})
}

func (s *Server) challenge(r *http.Request) string {
	c := `resource_metadata="` + s.resourceMetadataURL(r) + `"`
	if len(s.scopes) > 0 {
		c += `, scope="` + strings.Join(s.scopes, " ") + `"`
	}
	return c
}

// quoteSafe keeps a description inside its quoted-string.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			return '\''
		}
		return r
	}, s)
}

// checkResource checks the Authorization of a request to the resource,
// and rewrites a verified DPoP one to Bearer.
func (s *Server) checkResource(r *http.Request) *Error {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return nil // none, or two: serve refuses those
	}
	scheme, tok, _ := strings.Cut(vals[0], " ")
	tok = strings.TrimSpace(tok)
	now := s.cfg.Now()
	switch {
	case strings.EqualFold(scheme, "DPoP"):
		it := s.issuedToken(tok, now)
		if it == nil || it.jkt == "" {
			return dpopErr(ErrInvalidToken, "the token is not a DPoP-bound token this server issued (or it expired, or was ended)")
		}
		proofs := r.Header.Values(HeaderDPoP)
		if len(proofs) != 1 {
			return dpopErr(ErrInvalidDPoPProof, "send exactly one DPoP proof with a DPoP-bound token")
		}
		p, err := ParseDPoP(proofs[0])
		if err == nil {
			err = p.Check(DPoPCheck{Method: r.Method, URL: s.resource(r), AccessToken: tok, Now: now})
		}
		if err == nil && p.JKT != it.jkt {
			return dpopErr(ErrInvalidDPoPProof, "the proof is signed with another key than the token is bound to")
		}
		if err == nil {
			err = s.jtis.use(p, now)
		}
		if err != nil {
			return dpopErr(ErrInvalidDPoPProof, err.Error())
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Del(HeaderDPoP)
	case strings.EqualFold(scheme, "Bearer"):
		// A token this server issued is found by its hash; any other is
		// parsed to see whether it comes from the grant.
		it := s.issuedToken(tok, now)
		switch {
		case it != nil && it.jkt != "":
			return dpopErr(ErrInvalidToken, "this token is bound to a DPoP key: send it as Authorization: DPoP with a DPoP proof")
		case it == nil && s.mustBeIssued(tok):
			return oerr(http.StatusUnauthorized, ErrInvalidToken, errNotIssued)
		}
	}
	return nil
}

// issuedToken is the record of an access token this process issued and
// has not ended, nil for any other.
func (s *Server) issuedToken(tok string, now time.Time) *issuedToken {
	h := TokenHash(tok)
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.issued[h]
	if it == nil || it.fam.ended {
		return nil
	}
	return it
}

// errNotIssued refuses a token that only this server may have issued but
// did not (or whose authorization ended).
const errNotIssued = "this token was issued from this server's grant but not by this server since it started, by another authorization server for its own resource, or its authorization was ended: authorize again"

// mustBeIssued reports whether a token is one this server accepts only
// when it issued it: an attenuation of the grant (so this server, or
// someone holding the grant key, made it), or a token any authorization
// server issued (ContractPrefix). A token that cannot be read is
// left to the verifier.
func (s *Server) mustBeIssued(tok string) bool {
	t, err := dct.ParseInput(tok)
	return err == nil && s.mustBeIssuedToken(t)
}

func (s *Server) mustBeIssuedToken(t *dct.Token) bool {
	if s.fromGrantToken(t) {
		return true
	}
	for _, a := range t.Unverified().Attenuations {
		if strings.HasPrefix(a.ContractID, ContractPrefix) {
			return true
		}
	}
	return false
}

func (s *Server) fromGrantToken(t *dct.Token) bool {
	if t.Blocks() <= s.grantBlocks {
		return false
	}
	p, err := t.Prefix(s.grantBlocks)
	return err == nil && p.String() == s.cfg.Grant.String()
}

// dpopErr is a 401 whose challenge is DPoP's (RFC 9449 §7.1).
func dpopErr(code, desc string) *Error {
	e := oerr(http.StatusUnauthorized, code, desc)
	e.dpop = true
	return e
}

// challengeWriter adds the resource metadata to the challenge of a 401.
type challengeWriter struct {
	http.ResponseWriter
	s *Server
	r *http.Request
}

func (w *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		h := w.Header()
		switch v := h.Get("WWW-Authenticate"); {
		case v == "" || strings.EqualFold(v, "Bearer"):
			h.Set("WWW-Authenticate", "Bearer "+w.s.challenge(w.r))
		case len(v) > 7 && strings.EqualFold(v[:7], "Bearer "):
			h.Set("WWW-Authenticate", v+", "+w.s.challenge(w.r))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *challengeWriter) Write(b []byte) (int, error) { return w.ResponseWriter.Write(b) }

// Flush and Unwrap keep the SSE streams and http.ResponseController
// working through the wrapper.
func (w *challengeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *challengeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// AcceptToken holds every token the gate verifies to what Protect holds
// the Authorization header's to, wherever the token came from (the
// session's, params._delegateos.dct of a call, a delegation message's):
// an attenuation of the grant, or a token another authorization server
// issued (ContractPrefix), is accepted only when this process issued
// it and its authorization was not ended, and a DPoP-bound one only as
// the session's own token (proven: Protect checked its proof on the
// request that carried it); a token carried in a message has no proof.
// Tokens that are not attenuations of the grant are not its to judge.
// Set it as the gate's Accept.
func (s *Server) AcceptToken(token string, _ *dct.AuthorizedScope, proven bool) error {
	now := s.cfg.Now()
	it := s.issuedToken(token, now)
	if it == nil {
		// Not found as written: it may be an issued token in another of
		// its forms, so look it up in its canonical one.
		t, err := dct.ParseInput(token)
		if err != nil {
			return errors.New("the token cannot be read")
		}
		if !s.mustBeIssuedToken(t) {
			return nil
		}
		if it = s.issuedToken(t.String(), now); it == nil {
			return errors.New(errNotIssued)
		}
	}
	if it.jkt != "" && !proven {
		return errors.New("this token is bound to a DPoP key: it authorizes only as the session's token, sent as Authorization: DPoP with a DPoP proof, not in a message")
	}
	return nil
}
