package serve

import (
	"errors"
	"fmt"
	"time"
)

// The defaults of Options.MaxCredentialSessions, MaxTreeSessions and
// RecheckInterval.
const (
	DefaultMaxCredentialSessions = 16
	DefaultMaxTreeSessions       = 64
	DefaultRecheckInterval       = 30 * time.Second
)

var (
	errCredentialSessions = errors.New("too many sessions open with this credential: end one (DELETE) first")
	errTreeSessions       = errors.New("too many sessions open under this token's delegation tree: end one (DELETE) first")
)

// credentialKey is token in one canonical spelling (SessionCredential),
// or "" for no token.
func (s *Server) credentialKey(token string) string {
	if token == "" || s.opts.SessionCredential == nil {
		return token
	}
	if k := s.opts.SessionCredential(token); k != "" {
		return k
	}
	return token
}

// overCaps reports whether a new session of a client presenting the
// credential token (credentialKey; of delegation tree tree) would go over
// its caps. A session with
// no token of its client's is bound by MaxSessions only. The caller holds
// s.mu.
func (s *Server) overCaps(tree, token string) error {
	if token == "" {
		return nil
	}
	byCred, byTree := 0, 0
	for _, o := range s.sessions {
		if o.credKey == "" {
			continue
		}
		// By the canonical token, not by the header's spelling ("bearer  X"
		// is X, and so is X's {"token","format"} wrapper in any spacing).
		if o.credKey == token {
			byCred++
		}
		if tree != "" && o.tree == tree {
			byTree++
		}
	}
	if lim := s.opts.MaxCredentialSessions; lim > 0 && byCred >= lim {
		return errCredentialSessions
	}
	if lim := s.opts.MaxTreeSessions; lim > 0 && byTree >= lim {
		return errTreeSessions
	}
	return nil
}

// live checks a session's token with SessionLive; on an error it closes
// the session (stopping its upstream) and returns the error.
func (s *Server) live(sess *session) error {
	if sess.Token == "" || s.opts.SessionLive == nil {
		return nil
	}
	err := s.opts.SessionLive(sess.Token)
	if err != nil {
		sess.close(fmt.Sprintf("the session's token no longer authorizes calls (%v)", err))
	}
	return err
}

// Recheck checks the token of every open session now, as each
// RecheckInterval does, and closes the sessions whose token no longer
// authorizes calls: call it when a revocation arrives. Each distinct
// token is checked once.
func (s *Server) Recheck() {
	if s.opts.SessionLive == nil {
		return
	}
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if sess.Token != "" {
			all = append(all, sess)
		}
	}
	s.mu.Unlock()
	dead := map[string]error{}
	for _, sess := range all {
		err, seen := dead[sess.Token]
		if !seen {
			err = s.opts.SessionLive(sess.Token)
			dead[sess.Token] = err
		}
		if err != nil {
			// At once: closing one waits a little for its relay.
			go sess.close(fmt.Sprintf("the session's token no longer authorizes calls (%v)", err))
		}
	}
}

func (s *Server) recheckEvery(d time.Duration) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
			s.Recheck()
		}
	}
}
