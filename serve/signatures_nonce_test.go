package serve

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// A signature is checked against the holder its token names before the
// gate verifies the token. Anyone can mint a token, under a root of their
// own, that names their own key: such a request must not spend a nonce,
// or strangers fill the verifier's nonce memory (a bounded number of live
// nonces) and every signed client is then refused as busy.
func TestUntrustedTokenSpendsNoNonce(t *testing.T) {
	f := newSigFixture(t)
	rogue, _ := identity.FromSeed(bytes.Repeat([]byte{9}, 32), "rogue")
	tok, err := dct.Create(dct.CreateParams{Issuer: rogue, Delegatee: rogue.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_rogue", DelegationID: "del_rogue", MaxChainDepth: 1, MaxBudgetMicrocents: 1000,
		IssuedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	for i := range 3 {
		s, err := avpsig.Sign(rogue.PrivateKey(), "POST", "/mcp", "", body, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
		r.Header.Set(avpsig.SignatureHeader, s.Signature)
		if err := f.s.AuthorizeRequest(r, body, tok.String()); err == nil {
			t.Errorf("request %d signed for a token of an untrusted root was accepted", i)
		}
	}
	if n := f.s.Verifier.Nonces(); n != 0 {
		t.Fatalf("requests with a token of an untrusted root hold %d nonces", n)
	}
}

// A refusal the client can fix is 401; one the server cannot decide now
// (nonce memory full, nonce store down) is 503, to be retried.
func TestSignatureRefusalStatus(t *testing.T) {
	for reason, want := range map[avpsig.Reason]int{
		avpsig.ReasonReplayed: 401, avpsig.ReasonStale: 401, avpsig.ReasonWrongKey: 401, avpsig.ReasonMissing: 401,
		avpsig.ReasonBusy: 503, avpsig.ReasonUnavailable: 503,
	} {
		if got := (sigRefusal{&avpsig.Error{Reason: reason}}).StatusCode(); got != want {
			t.Errorf("%s: HTTP %d, want %d", reason, got, want)
		}
	}
}
