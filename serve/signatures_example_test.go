package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/serve"
)

// Holder-of-key: a server that requires every request to be signed
// (AVP-Sig) by the key its token was delegated to. The token is checked
// as the gate would (here against one trusted root) before a signature
// spends a nonce.
func ExampleSignatures_Apply() {
	root, _ := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	agent, _ := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "agent")
	tok, err := dct.Create(dct.CreateParams{Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "*", Resource: "*"}},
		ContractID:   "ct_example", DelegationID: "del_example", MaxChainDepth: 1, MaxBudgetMicrocents: 1000,
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		panic(err)
	}
	verifier, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}})
	if err != nil {
		panic(err)
	}
	sigs := &serve.Signatures{Verifier: &avpsig.Verifier{}, VerifyToken: func(t string) error {
		_, err := verifier.VerifyChain(t, time.Now())
		return err
	}}
	opts := serve.Options{Relay: answerAll}
	sigs.Apply(&opts, "")
	srv, err := serve.New(opts)
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv.Mux)
	defer func() { hs.Close(); srv.Drain(context.Background()) }()

	initialize := func(signer *identity.Keypair) int {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok.String())
		if signer != nil {
			s, err := avpsig.Sign(signer.PrivateKey(), http.MethodPost, "/mcp", "", []byte(body), time.Now(), nil)
			if err != nil {
				panic(err)
			}
			req.Header.Set(avpsig.SignatureHeader, s.Signature)
		}
		res, err := hs.Client().Do(req)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	fmt.Println("unsigned:", initialize(nil))
	fmt.Println("signed by the root:", initialize(root))
	fmt.Println("signed by the holder:", initialize(agent))
	// Output:
	// unsigned: 401
	// signed by the root: 401
	// signed by the holder: 200
}
