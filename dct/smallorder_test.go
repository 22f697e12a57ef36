package dct

import (
	"testing"

	"github.com/delegateos/delegateos/internal/b64"
)

// A token whose delegatee is a key of small order (here the identity
// point) could be extended by anyone: under that key R = identity, S = 0
// verifies every message, so a forger needs no private key to sign the
// next attenuation. Such a principal is refused wherever a token names
// it, before any signature is checked.
func TestVerifyRefusesSmallOrderPrincipal(t *testing.T) {
	identityPoint := make([]byte, 32)
	identityPoint[0] = 1
	weak := b64.Encode(identityPoint)
	forged := make([]byte, 64)
	forged[0] = 1 // R = the identity point, S = 0

	a := baseAuthority()
	a.Delegatee = weak
	at := Attenuation{Attenuator: weak, Delegatee: daveKey.ID(), DelegationID: "del_000000000002", ContractID: "ct_000000000001"}
	st := SignedToken{Format: Format, Authority: a, Attenuations: []Attenuation{at}}
	st.Signatures = []Signature{
		{Signer: rootKey.ID(), Covers: AuthorityBlock, Signature: signValue(t, rootKey, struct {
			Authority Authority `json:"authority"`
		}{a})},
		{Signer: weak, Covers: Covers(0), Signature: b64.Encode(forged)},
	}
	v := mustVerifier(t, Options{})
	_, err := v.Verify(serialize(t, st), readReq())
	wantDenial(t, err, ErrMalformed)
}
