package serve

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/redistest"
)

// With nonces in Redis, a request whose token the gate does not take
// writes nothing there; the holder's signed request writes one key.
func TestUntrustedTokenSpendsNoRedisNonce(t *testing.T) {
	rs := redistest.Start(t)
	f := newSigFixture(t)
	if err := f.s.Verifier.ShareNonces(context.Background(), rs.URL()); err != nil {
		t.Fatal(err)
	}
	rogue, _ := identity.FromSeed(bytes.Repeat([]byte{9}, 32), "rogue")
	tok, err := dct.Create(dct.CreateParams{Issuer: rogue, Delegatee: rogue.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_rogue", DelegationID: "del_rogue", MaxChainDepth: 1, MaxBudgetMicrocents: 1000,
		IssuedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	try := func(k *identity.Keypair, token string) error {
		s, err := avpsig.Sign(k.PrivateKey(), "POST", "/mcp", "", body, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
		r.Header.Set(avpsig.SignatureHeader, s.Signature)
		return f.s.AuthorizeRequest(r, body, token)
	}
	for i := range 3 {
		if err := try(rogue, tok.String()); err == nil {
			t.Errorf("request %d signed for a token of an untrusted root was accepted", i)
		}
	}
	// Joining the fleet wrote its window (delegateos:nonce-window); count
	// the nonces.
	nonces := func() (int, error) {
		keys, err := rs.Client().Keys(context.Background(), "delegateos:nonce:*").Result()
		return len(keys), err
	}
	if n, err := nonces(); err != nil || n != 0 {
		t.Fatalf("requests with a token of an untrusted root wrote %d keys (%v)", n, err)
	}
	if err := try(f.agent, f.tok.String()); err != nil {
		t.Fatal(err)
	}
	if n, err := nonces(); err != nil || n != 1 {
		t.Fatalf("the holder's request wrote %d keys (%v)", n, err)
	}
}
