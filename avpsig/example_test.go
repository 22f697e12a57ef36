package avpsig_test

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/identity"
)

// A client signs its requests with the key its delegation token was issued
// to; the server checks the signer is the token's holder.
func Example() {
	_, key, _ := ed25519.GenerateKey(nil)
	holder := identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey))

	v := &avpsig.Verifier{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := v.Verify(r, body, holder); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "signed by the holder")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &avpsig.Transport{Key: key}}
	resp, err := client.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(out))
	// Output: 200 signed by the holder
}
