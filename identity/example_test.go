package identity_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/delegateos/delegateos/identity"
)

// A principal is named by its principal ID or, equivalently, its did:key.
// The seed here is the W3C CCG did:key test vector of 32 zero bytes; real
// keys come from identity.Generate(nil, name).
func Example() {
	k, err := identity.FromSeed(make([]byte, 32), "alice")
	if err != nil {
		panic(err)
	}
	fmt.Println(k.ID())
	fmt.Println(k.DID())

	id, err := identity.NormalizePrincipal("did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp")
	if err != nil {
		panic(err)
	}
	fmt.Println(id == k.ID())

	_, err = identity.ParsePrincipal("did:key:z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW")
	fmt.Println(err)
	// Output:
	// O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik
	// did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp
	// true
	// invalid principal: "did:key:z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW" is not an Ed25519 did:key (multicodec 0xed01 + 32 bytes)
}

// Key files hold the seed, are written with mode 0600, and are refused when
// other users could read them.
func ExampleSaveKeyFile() {
	dir, err := os.MkdirTemp("", "keys")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "alice.json")

	k, _ := identity.FromSeed(make([]byte, 32), "alice")
	if err := identity.SaveKeyFile(path, k); err != nil {
		panic(err)
	}
	loaded, err := identity.LoadKeyFile(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(loaded.Name(), loaded.ID() == k.ID())

	fmt.Println(identity.SaveKeyFile(path, k) != nil) // never overwrites
	// Output:
	// alice true
	// true
}
