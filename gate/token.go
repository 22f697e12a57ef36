package gate

import (
	"errors"

	"github.com/delegateos/delegateos/dct"
)

// ErrNoRoots is VerifyToken's error when the gate trusts no root, so that
// no token can be verified.
var ErrNoRoots = errors.New("no trusted roots to verify it against")

// VerifyToken verifies a token as the gate does before it asks for any
// capability (§10.1 steps 1–5: parse, revocation, trusted root and
// signatures, attenuation chain, validity period). A front checks with it
// the tokens it is handed outside a call (a signed request's, say).
func (g *Gate) VerifyToken(token string) (*dct.AuthorizedScope, error) {
	if g.Verifier == nil {
		return nil, ErrNoRoots
	}
	return g.Verifier.VerifyChain(token, g.now())
}

// CheckToken is VerifyToken, and the token's chain must pass through no
// delegation that has ended: such a token authorizes nothing. A front
// checks a session's token with it when the session opens and while it
// lasts.
func (g *Gate) CheckToken(token string) error {
	if _, err := g.VerifyToken(token); err != nil {
		return err
	}
	_, err := g.ListView(MethodToolsList, token)
	return err
}
