package ldp

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
)

// Ed25519Input returns the bytes the Ed25519 profile signs: the RFC 8785
// (JCS) form of the envelope less its signature member. For a received
// envelope that is the envelope as sent (every member the sender wrote,
// nulls included); for one built here, its MarshalJSON form.
func Ed25519Input(e *Envelope) ([]byte, error) {
	data := e.raw
	if data == nil {
		var err error
		if data, err = e.MarshalJSON(); err != nil {
			return nil, err
		}
		if e.Signature == "" {
			// MarshalJSON wrote no signature member: its JCS form is
			// the input.
			return jcs.Transform(data)
		}
	}
	return unsignedJCS(data)
}

// unsignedJCS is the JCS form of the JSON object data less its signature
// member.
func unsignedJCS(data []byte) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, err
	}
	delete(members, "signature")
	return canon.Marshal(members)
}

// SignEd25519 signs e with key under the Ed25519 profile: it sets
// signature_algorithm "ed25519", signer to the key's did:key, and
// signature to the unpadded base64url Ed25519 signature over
// Ed25519Input. Sign last: any later change to e voids the signature.
//
// A number of e not written in its JCS form (1.0, 1e2) is rewritten in it,
// so that what is sent is what is signed (ParseEnvelope refuses an
// Ed25519 envelope that carries another form); a number whose JCS form is
// another number (an integer beyond 2^53, more digits than a double
// holds) is refused: the signature could not say which one was meant.
func SignEd25519(e *Envelope, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("ldp: signing key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	e.raw = nil
	e.Signature = ""
	e.SignatureAlgorithm = AlgEd25519
	e.Signer = identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey))
	data, err := canonicalNumbers(e)
	if err != nil {
		return fmt.Errorf("ldp: cannot sign the envelope: %w", err)
	}
	if data == nil {
		if data, err = e.MarshalJSON(); err != nil {
			return err
		}
	}
	// Unsigned as yet, MarshalJSON wrote no signature member: the JCS
	// form of what it wrote is Ed25519Input(e).
	msg, err := jcs.Transform(data)
	if err != nil {
		return err
	}
	e.Signature = b64.Encode(ed25519.Sign(key, msg))
	return nil
}

// verifyEd25519 checks e's Ed25519 signature; want, when not empty, is the
// did:key (or principal ID) that must have signed.
func verifyEd25519(e *Envelope, want string) error {
	if e.Signer == "" {
		return malformed("an ed25519 envelope names no signer")
	}
	pub, err := identity.PublicKeyFromDID(e.Signer)
	if err != nil {
		return malformed("signer: %v", err)
	}
	if want != "" {
		wantKey, err := identity.ParsePrincipal(want)
		if err != nil {
			return refuse(ReasonWrongKey, "the required signer %s is not a key: %v", clip(want), err)
		}
		if !wantKey.Equal(pub) {
			return refuse(ReasonWrongKey, "signed by %s, not by %s", clip(e.Signer), clip(want))
		}
	}
	sig, err := b64.Decode(e.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return malformed("ed25519 signature is not %d bytes of unpadded base64url", ed25519.SignatureSize)
	}
	msg, err := Ed25519Input(e)
	if err != nil {
		return malformed("%v", err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return refuse(ReasonTampered, "ed25519 signature by %s does not verify over the envelope", clip(e.Signer))
	}
	return nil
}

// canonicalNumbers rewrites e's numbers in their JCS form, refusing one
// whose JCS form is another number. It returns e's MarshalJSON when it
// rewrote nothing, else nil.
func canonicalNumbers(e *Envelope) ([]byte, error) {
	data, err := e.MarshalJSON()
	if err != nil {
		return nil, err
	}
	is, err := firstNumberIssue(data, false)
	if err != nil {
		return nil, err
	}
	if is == nil {
		return data, nil
	}
	if is, err = firstNumberIssue(data, true); err != nil {
		return nil, err
	}
	if is != nil {
		return nil, lossyNumberError(is)
	}
	c, err := jcs.Transform(data)
	if err != nil {
		return nil, err
	}
	p, err := ParseEnvelope(c)
	if err != nil {
		return nil, err
	}
	e.Body, e.Provenance, e.DelegateOS = p.Body, p.Provenance, p.DelegateOS
	return nil, nil
}
