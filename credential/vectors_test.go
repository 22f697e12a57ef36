package credential

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

const w3cDir = "testdata/w3c-eddsa-jcs-2022"

func readVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w3cDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// w3cKey decodes keyPair.json: privateKeyMultibase is 'z' + base58btc of
// the multicodec ed25519-priv (0x80 0x26) and the 32-byte seed.
func w3cKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	var kp struct {
		PublicKeyMultibase  string `json:"publicKeyMultibase"`
		PrivateKeyMultibase string `json:"privateKeyMultibase"`
	}
	if err := json.Unmarshal(readVector(t, "keyPair.json"), &kp); err != nil {
		t.Fatal(err)
	}
	raw, err := identity.Base58Decode(strings.TrimPrefix(kp.PrivateKeyMultibase, "z"))
	if err != nil || len(raw) != 34 || raw[0] != 0x80 || raw[1] != 0x26 {
		t.Fatalf("privateKeyMultibase: %x, %v", raw, err)
	}
	key := ed25519.NewKeyFromSeed(raw[2:])
	if did := identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey)); did != "did:key:"+kp.PublicKeyMultibase {
		t.Fatalf("the seed gives %s, keyPair.json says %s", did, kp.PublicKeyMultibase)
	}
	return key
}

var w3cCreated = time.Date(2023, 2, 24, 23, 36, 38, 0, time.UTC)

// w3cNow is a time inside the vector credential's window.
var w3cNow = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// traceValues lists what a trace must equal, file by file.
func traceValues(tr *Trace) map[string]string {
	return map[string]string{
		"canonDocJCS.txt":     string(tr.CanonicalDocument),
		"proofCanonJCS.txt":   string(tr.CanonicalProofConfig),
		"docHashJCS.txt":      hex.EncodeToString(tr.DocumentHash[:]),
		"proofHashJCS.txt":    hex.EncodeToString(tr.ProofConfigHash[:]),
		"combinedHashJCS.txt": hex.EncodeToString(tr.HashData),
		"sigHexJCS.txt":       hex.EncodeToString(tr.Signature),
		"sigBTC58JCS.txt":     tr.ProofValue,
	}
}

// TestW3CVectorsSign reproduces every value of the eddsa-jcs-2022 vectors
// from unsigned.json, keyPair.json and the proof options, byte for byte.
func TestW3CVectorsSign(t *testing.T) {
	signed, tr, err := Sign(readVector(t, "unsigned.json"), w3cKey(t), Options{Created: w3cCreated})
	if err != nil {
		t.Fatal(err)
	}
	for file, got := range traceValues(tr) {
		if want := string(readVector(t, file)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", file, got, want)
		}
	}
	want, err := canonical(mustParse(t, readVector(t, "signedJCS.json")))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(signed, want) {
		t.Errorf("signed document:\n got %s\nwant %s", signed, want)
	}
	cfg, err := canonical(mustParse(t, readVector(t, "proofConfigJCS.json")))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cfg, readVector(t, "proofCanonJCS.txt")) {
		t.Errorf("JCS(proofConfigJCS.json) = %s, not proofCanonJCS.txt", cfg)
	}
}

// TestW3CVectorsVerify verifies signedJCS.json and checks that verification
// computes the same intermediate values.
func TestW3CVectorsVerify(t *testing.T) {
	r, err := Verify(readVector(t, "signedJCS.json"), VerifyOptions{Now: w3cNow})
	if err != nil {
		t.Fatal(err)
	}
	for file, got := range traceValues(r.Trace) {
		if want := string(readVector(t, file)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", file, got, want)
		}
	}
	if r.Construction != W3C || r.Signer != "did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2" ||
		r.Issuer != "https://vc.example/issuers/5678" || r.IssuerIsSigner || !r.Created.Equal(w3cCreated) {
		t.Errorf("result: %+v", r)
	}
	// The vector credential has no validUntil: it stays valid; before its
	// validFrom it is not.
	if _, err := Verify(readVector(t, "signedJCS.json"), VerifyOptions{Now: time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)}); !isKind(err, ErrNotYetValid) {
		t.Errorf("before validFrom: %v", err)
	}
	// A hashData with one bit flipped does not verify.
	pub := w3cKey(t).Public().(ed25519.PublicKey)
	bad := bytes.Clone(r.Trace.HashData)
	bad[0] ^= 1
	if ed25519.Verify(pub, bad, r.Trace.Signature) {
		t.Error("a flipped hashData verified")
	}
}

// TestW3CVectorsTamper changes each field of the signed vector in turn.
func TestW3CVectorsTamper(t *testing.T) {
	n := tamperEach(t, readVector(t, "signedJCS.json"), VerifyOptions{Now: w3cNow})
	t.Logf("%d one-field tampers, each rejected", n)
}

func mustParse(t *testing.T, b []byte) object {
	t.Helper()
	o, err := parseObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
