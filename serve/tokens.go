package serve

import (
	"errors"

	"github.com/delegateos/delegateos/dct"
)

// TokenTree names the delegation tree of a verified token (an
// Options.SessionTree): the revocation ID of its authority block, which
// only a trusted root can sign, so a token holder cannot make more trees
// by attenuating.
func TokenTree(tok string) string {
	t, err := dct.ParseInput(tok)
	if err != nil {
		return ""
	}
	return t.RevocationIDs()[0]
}

// TokenCredential is the bare base64url form of a token the client may
// have sent in its {"token","format"} wrapper, any spacing (an
// Options.SessionCredential): one credential, one spelling, for the
// per-credential caps.
func TokenCredential(tok string) string {
	t, err := dct.ParseInput(tok)
	if err != nil {
		return ""
	}
	return t.String()
}

// SessionLive is check (which verifies a token and that its delegation has
// not ended) for sessions already open (an Options.SessionLive): a
// revocation list that cannot be read just now refuses calls (the gate
// checks every call), but does not close every session.
func SessionLive(check func(string) error) func(string) error {
	return func(tok string) error {
		err := check(tok)
		var d *dct.Denial
		if errors.As(err, &d) && d.Type == dct.Revoked && d.RevocationID == "" {
			return nil
		}
		return err
	}
}
