package serve

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// sigFixture is a root, an agent holding a token of the root's, and
// Signatures that take the root's tokens.
type sigFixture struct {
	root, agent *identity.Keypair
	tok         *dct.Token
	s           *Signatures
}

func newSigFixture(t *testing.T) *sigFixture {
	t.Helper()
	f := &sigFixture{}
	f.root, _ = identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	f.agent, _ = identity.FromSeed(bytes.Repeat([]byte{2}, 32), "agent")
	var err error
	f.tok, err = dct.Create(dct.CreateParams{Issuer: f.root, Delegatee: f.agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_extras", DelegationID: "del_extras", MaxChainDepth: 1, MaxBudgetMicrocents: 1000,
		IssuedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := dct.NewVerifier(dct.Options{Roots: []string{f.root.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	f.s = &Signatures{Verifier: &avpsig.Verifier{}, VerifyToken: func(tok string) error {
		_, err := v.VerifyChain(tok, time.Now())
		return err
	}}
	return f
}

func TestSignaturesCheck(t *testing.T) {
	f := newSigFixture(t)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	req := func(key *identity.Keypair) *http.Request {
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
		if key != nil {
			s, err := avpsig.Sign(key.PrivateKey(), "POST", "/mcp", "", body, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Authorization", s.Signature)
		}
		return r
	}
	reason := func(err error) avpsig.Reason {
		var e *avpsig.Error
		if errors.As(err, &e) {
			return e.Reason
		}
		return ""
	}
	if err := f.s.Check(req(f.agent), body, f.tok.String()); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Check(req(f.root), body, f.tok.String()); reason(err) != avpsig.ReasonWrongKey {
		t.Fatalf("the root's key: %v", err)
	}
	if err := f.s.Check(req(nil), body, f.tok.String()); reason(err) != avpsig.ReasonMissing {
		t.Fatalf("unsigned: %v", err)
	}
	if err := f.s.Check(req(f.agent), body, ""); reason(err) != avpsig.ReasonMissing {
		t.Fatalf("no token: %v", err)
	}
	r := req(f.agent)
	if err := f.s.Check(r, body, f.tok.String()); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Check(r, body, f.tok.String()); reason(err) != avpsig.ReasonReplayed {
		t.Fatalf("replay: %v", err)
	}
	// Without signatures required (nil Signatures) nothing is checked.
	var none *Signatures
	if err := none.Check(req(nil), body, ""); err != nil {
		t.Fatal(err)
	}
	// Signatures with nothing to check them by refuse.
	if err := (&Signatures{}).Check(req(f.agent), body, f.tok.String()); err == nil {
		t.Fatal("Signatures without a Verifier accepted a request")
	}
}

func TestSignaturesAuthorizeRequest(t *testing.T) {
	f := newSigFixture(t)
	other, err := dct.Create(dct.CreateParams{Issuer: f.root, Delegatee: f.root.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_other", DelegationID: "del_other", MaxChainDepth: 1, MaxBudgetMicrocents: 1,
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	call := func(tok string) []byte {
		if tok == "" {
			return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
		}
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_delegateos":{"dct":"` + tok + `"}}}`)
	}
	signedBy := func(k *identity.Keypair, body []byte) *http.Request {
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
		s, err := avpsig.Sign(k.PrivateKey(), "POST", "/mcp", "", body, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set(avpsig.SignatureHeader, s.Signature)
		r.Header.Set("Authorization", "Bearer "+f.tok.String())
		return r
	}
	status := func(err error) int {
		var sc interface{ StatusCode() int }
		if errors.As(err, &sc) {
			return sc.StatusCode()
		}
		return 0
	}
	// The session's token: its holder (the agent) signs.
	b := call("")
	if err := f.s.AuthorizeRequest(signedBy(f.agent, b), b, f.tok.String()); err != nil {
		t.Fatal(err)
	}
	// The request's own token wins: its holder (the root) must sign.
	b = call(other.String())
	if err := f.s.AuthorizeRequest(signedBy(f.agent, b), b, f.tok.String()); status(err) != 401 || !strings.Contains(err.Error(), string(avpsig.ReasonWrongKey)) {
		t.Fatalf("the session holder signing for another token: %v", err)
	}
	if err := f.s.AuthorizeRequest(signedBy(f.root, b), b, f.tok.String()); err != nil {
		t.Fatal(err)
	}
	// A body the relay would not read is refused, not read another way.
	b = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_delegateos":{"dct":"x"},"_delegateos":{"dct":"y"}}}`)
	if err := f.s.AuthorizeRequest(signedBy(f.agent, b), b, f.tok.String()); status(err) != 401 || !strings.Contains(err.Error(), string(avpsig.ReasonMalformed)) {
		t.Fatalf("ambiguous body: %v", err)
	}
	// A GET of the session's stream.
	r := httptest.NewRequest("GET", "/mcp", nil)
	s, _ := avpsig.Sign(f.agent.PrivateKey(), "GET", "/mcp", "", nil, time.Now(), nil)
	r.Header.Set(avpsig.SignatureHeader, s.Signature)
	if err := f.s.AuthorizeRequest(r, nil, f.tok.String()); err != nil {
		t.Fatal(err)
	}
}

// TestSignaturesHolderProven: a request marked HolderProven for a token
// is taken under that token (still one the gate verifies), and under no
// other: its own _delegateos token, another's, is checked by signature.
func TestSignaturesHolderProven(t *testing.T) {
	f := newSigFixture(t)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	proven := func(tok string) *http.Request {
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
		return r.WithContext(HolderProven(r.Context(), tok))
	}
	if err := f.s.AuthorizeRequest(proven(f.tok.String()), body, f.tok.String()); err != nil {
		t.Fatalf("proven: %v", err)
	}
	if err := f.s.AuthorizeRequest(proven("another token"), body, f.tok.String()); err == nil || !strings.Contains(err.Error(), string(avpsig.ReasonMissing)) {
		t.Fatalf("proven for another token: %v", err)
	}
	if err := f.s.AuthorizeRequest(proven(""), body, f.tok.String()); err == nil {
		t.Fatal("an empty proof was taken")
	}
	own := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_delegateos":{"dct":"` + f.tok.String() + `x","format":"` + dct.Format + `"}}}`)
	if err := f.s.AuthorizeRequest(proven(f.tok.String()), own, f.tok.String()); err == nil || errors.Is(err, errBindUnsigned) {
		t.Fatal("a request naming its own token was taken on the session token's proof")
	}
	untrusted := &Signatures{Verifier: &avpsig.Verifier{}, VerifyToken: func(string) error { return errors.New("untrusted root") }}
	if err := untrusted.AuthorizeRequest(proven(f.tok.String()), body, f.tok.String()); err == nil {
		t.Fatal("a proof was taken for a token the gate does not verify")
	}
}
