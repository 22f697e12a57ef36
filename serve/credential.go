package serve

import (
	"errors"
	"net/http"
	"strings"

	"github.com/delegateos/delegateos/avpsig"
)

// credential reads what a request presents in Authorization: cred, the
// credential a session is bound to (compared by hash), and token, the DCT
// of a Bearer value. An AVP client puts its request signature there
// (AVP-Sig): it carries no token (the request's own params._delegateos, or
// the server's --token, serves) and binds the session to its signer, whose
// signature Options.Authorize checks when signatures are required, and
// verifyAVPSig otherwise (before the request reaches a session). Two
// Authorization values, or an AVP-Sig value beside an AVP-Signature
// header, are two credentials, which readers would pick between: refused.
func credential(r *http.Request) (cred, token string, err error) {
	vals := r.Header.Values("Authorization")
	switch {
	case len(vals) == 0:
		return "", "", nil
	case len(vals) > 1:
		return "", "", errors.New("the request has more than one Authorization header; send one")
	}
	auth := vals[0]
	scheme, _, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, avpsig.Scheme) {
		if token = bearer(auth); token == "" {
			return "", "", errors.New("the Authorization header must be \"Bearer <DCT>\" or an AVP-Sig signature")
		}
		return auth, token, nil
	}
	if len(r.Header.Values(avpsig.SignatureHeader)) > 0 {
		return "", "", errors.New("the request has two AVP-Sig signatures (in Authorization and in " + avpsig.SignatureHeader + "); send one")
	}
	h, err := avpsig.ParseHeader(auth)
	if err != nil {
		return "", "", errors.New("the Authorization header's AVP-Sig signature cannot be read: " + err.Error())
	}
	return avpsig.Scheme + " " + h.DID, "", nil
}

// verifyAVPSig checks an AVP-Sig in Authorization against the key its own
// did:key names, and spends its nonce: the DID it names is the credential
// of the session it opens or enters, and a DID alone is public. A request
// with no AVP-Sig there passes.
func (s *Server) verifyAVPSig(r *http.Request, body []byte) error {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return nil // none, or refused by credential
	}
	scheme, _, _ := strings.Cut(vals[0], " ")
	if !strings.EqualFold(scheme, avpsig.Scheme) {
		return nil
	}
	h, err := avpsig.ParseHeader(vals[0])
	if err != nil {
		return err
	}
	return s.sigs.Verify(r, body, h.DID)
}
