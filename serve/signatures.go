package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/proxy"
)

// Signatures is holder-of-key authorization (require_signature): every MCP
// request must carry an AVP-Sig signature by the key of the current
// delegatee of the token the gate will decide it with. Apply makes it a
// server's Options.Authorize. A nil *Signatures requires nothing.
type Signatures struct {
	// Verifier checks each signature and spends its nonce; nil refuses
	// every request.
	Verifier *avpsig.Verifier
	// VerifyToken verifies a token as the gate does. Only a token the gate
	// would take names a key worth a nonce: anyone can mint one, under a
	// root of their own, that names their key. Nil refuses every request.
	VerifyToken func(token string) error

	// holders caches each token string's current delegatee.
	holders sync.Map
	mu      sync.Mutex
	nHolder int64
}

// maxHolders bounds the cache of token holders.
const maxHolders = 10_000

// Apply makes s check every request of a server built with o, before
// o.Authorize (which still runs after it), against the token the gate
// will decide the request with: the request's own params._delegateos
// token, else its session's, else, for the request that creates a
// session, the token of its Authorization: Bearer header, else
// defaultToken (the server's token for sessions whose client sends none).
// It sets o.AuthorizeVerifiesSignatures: s verifies every signature.
func (s *Signatures) Apply(o *Options, defaultToken string) {
	if s == nil {
		return
	}
	o.AuthorizeVerifiesSignatures = true
	next := o.Authorize
	o.Authorize = func(r *http.Request, body []byte, sess *Session) error {
		token := defaultToken
		switch {
		case sess != nil && sess.Token != "":
			token = sess.Token
		case sess == nil:
			if b := bearer(r.Header.Get("Authorization")); b != "" {
				token = b
			}
		}
		if err := s.AuthorizeRequest(r, body, token); err != nil {
			return err
		}
		if next != nil {
			return next(r, body, sess)
		}
		return nil
	}
}

// holderProofKey is the context key of a HolderProven request.
type holderProofKey struct{}

// HolderProven marks an in-process request (one no client can send, the
// LDP front's tools/call) whose sender proved, by other means than
// AVP-Sig, that it holds the key of token's current delegatee: an LDP
// envelope signed with Ed25519 by that key over its whole body, fresh,
// spent once in the front's replay store, addressed to this delegate in
// a session it opened. Signatures take such a request under token, and
// under no other token.
func HolderProven(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, holderProofKey{}, token)
}

// ldpFrontKey is the context key of a FromLDPFront request.
type ldpFrontKey struct{}

// FromLDPFront marks an in-process request (one no client can send) of the
// server's LDP front: a stateless one goes to a relay session of the
// front's own (Session.LDPFront), never shared with a client presenting
// the same credential, so that the relay can be told who answers its
// approvals (proxy.Config.ApprovalElsewhere for every other session).
func FromLDPFront(ctx context.Context) context.Context {
	return context.WithValue(ctx, ldpFrontKey{}, true)
}

func fromLDPFront(ctx context.Context) bool {
	v, _ := ctx.Value(ldpFrontKey{}).(bool)
	return v
}

// AuthorizeRequest checks an MCP request over HTTP: body is its POST body
// (nil for GET and DELETE) and sessionToken the token its session was
// created with (for the request that creates one, the token it carries in
// Authorization). The request's own _delegateos token, read as the relay
// reads it, wins over the session's, as at the gate. A refused signature
// is an error with a StatusCode method: 401, or 503 when the server cannot
// decide now.
func (s *Signatures) AuthorizeRequest(r *http.Request, body []byte, sessionToken string) error {
	if s == nil {
		return nil
	}
	token := sessionToken
	if len(body) > 0 {
		if bindsToken(body) {
			return errBindUnsigned
		}
		own, err := proxy.RequestToken(body)
		if err != nil {
			return sigRefusal{&avpsig.Error{Reason: avpsig.ReasonMalformed, Detail: "the request cannot be read to find its token: " + err.Error()}}
		}
		if own != "" {
			token = own
		}
	}
	if proven, ok := r.Context().Value(holderProofKey{}).(string); ok && proven != "" && proven == token {
		// The holder's key was proven for this very token; it must still
		// be a token the gate takes.
		if s.VerifyToken == nil {
			return errors.New("signatures are required, and this server has no way to check them")
		}
		if err := s.VerifyToken(token); err != nil {
			return fmt.Errorf("the token does not verify, so no signature is checked against its holder: %w", err)
		}
		return nil
	}
	if err := s.Check(r, body, token); err != nil {
		var e *avpsig.Error
		if errors.As(err, &e) {
			return sigRefusal{e}
		}
		return err
	}
	return nil
}

// Check checks the signature of one HTTP request whose body has been
// read against the holder of token, the token the gate will decide it
// with. A request without a token cannot be bound to a holder and is
// refused.
func (s *Signatures) Check(r *http.Request, body []byte, token string) error {
	if s == nil {
		return nil
	}
	if token == "" {
		return &avpsig.Error{Reason: avpsig.ReasonMissing, Detail: "signatures are required, and a signature is checked against the token's holder: present a token with the request or the session"}
	}
	if s.Verifier == nil || s.VerifyToken == nil {
		return errors.New("signatures are required, and this server has no way to check them")
	}
	if err := s.VerifyToken(token); err != nil {
		return fmt.Errorf("the token does not verify, so no signature is checked against its holder: %w", err)
	}
	h, err := s.holder(token)
	if err != nil {
		return &avpsig.Error{Reason: avpsig.ReasonWrongKey, Detail: fmt.Sprintf("the token's holder cannot be read: %v", err)}
	}
	return s.Verifier.VerifyInTree(r, body, h.key, h.tree)
}

// errBindUnsigned refuses delegateos/delegate when signatures are
// required: the calls that follow it would run under the token it binds
// while their signatures are checked against the session's own token.
var errBindUnsigned = errors.New("delegateos/delegate binds a token to the session, which a server that requires signatures does not do: send the token with each call in params._delegateos, signed by its holder")

// bindsToken reports whether an MCP request body, read as the relay will
// read it, is delegateos/delegate (a request or a notification). A body
// the relay cannot read is refused by the server before it is relayed.
func bindsToken(body []byte) bool {
	var frame bytes.Buffer
	if err := json.Compact(&frame, body); err != nil {
		return false
	}
	m, err := proxy.ReadClientMessage(frame.Bytes())
	return err == nil && m.Method == gate.MethodDelegate
}

// sigRefusal is a refused signature, answered with the reason: 401 for a
// signature that does not hold, 503 when the server cannot decide now (its
// nonce memory is full, or the Redis it keeps nonces in does not answer),
// which says to retry rather than that the credentials are wrong.
type sigRefusal struct{ err *avpsig.Error }

func (s sigRefusal) Error() string { return s.err.Error() }
func (s sigRefusal) Unwrap() error { return s.err }

// StatusCode is the HTTP status of the refusal.
func (s sigRefusal) StatusCode() int {
	switch s.err.Reason {
	case avpsig.ReasonBusy, avpsig.ReasonUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// tokenHolder is who holds a token, as a signature is checked against it.
type tokenHolder struct {
	// key is the current delegatee.
	key string
	// tree is the revocation ID of the token's authority block: its
	// delegation tree, which only a root's key can make more of, and which
	// its signers' nonces are counted against.
	tree string
}

// holder returns the current delegatee a token names and its tree. It is
// not verified here: Check has VerifyToken verify it.
func (s *Signatures) holder(token string) (tokenHolder, error) {
	if h, ok := s.holders.Load(token); ok {
		return h.(tokenHolder), nil
	}
	tok, err := dct.ParseInput(token)
	if err != nil {
		return tokenHolder{}, err
	}
	h := tokenHolder{key: tok.Delegatee(), tree: tok.RevocationIDs()[0]}
	if _, err := identity.PublicKey(h.key); err != nil {
		return tokenHolder{}, err
	}
	s.mu.Lock()
	if s.nHolder >= maxHolders {
		s.holders.Clear()
		s.nHolder = 0
	}
	s.nHolder++
	s.mu.Unlock()
	s.holders.Store(token, h)
	return h, nil
}
