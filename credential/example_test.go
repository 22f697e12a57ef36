package credential_test

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/delegateos/delegateos/credential"
)

// Sign a credential with an Ed25519 key and verify it; the verification
// method is the key's did:key.
func Example() {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	unsigned := []byte(`{
	  "@context": ["https://www.w3.org/ns/credentials/v2"],
	  "type": ["VerifiableCredential"],
	  "issuer": "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp",
	  "credentialSubject": {"id": "did:example:alice", "score": 0.95}
	}`)
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	signed, _, err := credential.Sign(unsigned, key, credential.Options{Created: created})
	if err != nil {
		panic(err)
	}
	r, err := credential.Verify(signed, credential.VerifyOptions{Now: created})
	fmt.Println(err, r.Signer, r.IssuerIsSigner)

	// Changing the subject breaks the signature.
	forged := bytes.Replace(signed, []byte(`"score":0.95`), []byte(`"score":1`), 1)
	_, err = credential.Verify(forged, credential.VerifyOptions{Now: created})
	fmt.Println(err)
	// Output:
	// <nil> did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp true
	// signature: invalid signature: Ed25519 over SHA-256(proof config) 2313e2b7254beb1c… ‖ SHA-256(document) 82760c52d0d2250b… does not verify under did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp
}
