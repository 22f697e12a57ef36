package credential

import (
	"crypto/ed25519"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func readAVP(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/avp", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// avpNow is inside the samples' window (2026-04-01 to 2027-05-06).
var avpNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

const avpPrincipal = "did:key:z6MkiYbwC5honA2sxE7XLAyJMDFibLvVg8FgodBX4A4CaUgr"

func avpKey(t *testing.T) ed25519.PrivateKey {
	seed, err := hex.DecodeString("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// TestAVPSamples runs the AVP SDK's DelegationReceipt samples: each result
// as the samples' README gives it.
func TestAVPSamples(t *testing.T) {
	w3c := VerifyOptions{Now: avpNow}
	legacy := VerifyOptions{Now: avpNow, AllowAVPLegacy: true}
	tests := []struct {
		file   string
		opts   VerifyOptions
		check  string // the failed check; "" for valid
		kind   error
		digest string
	}{
		{"valid_hashdata.jsonld", w3c, "", nil, "9a9266a08d9f20e3cfc817c63fb0636828f3bca71392a235529c8faab9fac017"},
		{"valid_hashdata.jsonld", legacy, "", nil, "9a9266a08d9f20e3cfc817c63fb0636828f3bca71392a235529c8faab9fac017"},
		{"valid.json", w3c, "proofPurpose", ErrUnsupported, ""},
		{"valid.json", legacy, "", nil, "7931f851f78f64c6377cf02dad25235129b2877de7b566df6245b4f70e760f31"},
		{"expired.json", w3c, "proofPurpose", ErrUnsupported, ""},
		{"expired.json", legacy, "validity", ErrExpired, ""},
		{"tampered.json", w3c, "proofPurpose", ErrUnsupported, ""},
		{"tampered.json", legacy, "signature", ErrSignature, ""},
		{"valid_hashdata.jsonld", VerifyOptions{Now: time.Date(2027, 5, 6, 0, 0, 1, 0, time.UTC)}, "validity", ErrExpired, ""},
		{"valid_hashdata.jsonld", VerifyOptions{Now: time.Date(2026, 3, 31, 23, 58, 59, 0, time.UTC)}, "validity", ErrNotYetValid, ""},
		// Within the 60 s of clock skew before validFrom.
		{"valid_hashdata.jsonld", VerifyOptions{Now: time.Date(2026, 3, 31, 23, 59, 1, 0, time.UTC)}, "", nil, ""},
		{"valid_hashdata.jsonld", VerifyOptions{Now: avpNow, Signer: avpPrincipal}, "", nil, ""},
		{"valid_hashdata.jsonld", VerifyOptions{Now: avpNow, Signer: "did:key:z6Mkha2Epo5LtXSbfqe4pr6isB3r8Hx86QfMwfiAfUbf8db5"}, "signer", ErrUntrustedSigner, ""},
	}
	for _, tt := range tests {
		r, err := Verify(readAVP(t, tt.file), tt.opts)
		if tt.check == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.file, err)
				continue
			}
			if tt.digest != "" && r.Digest != tt.digest {
				t.Errorf("%s: digest %s, want %s", tt.file, r.Digest, tt.digest)
			}
			continue
		}
		var e *Error
		if !isKind(err, tt.kind) || !errorAs(err, &e) || e.Check != tt.check {
			t.Errorf("%s (legacy %v): error %v, want check %q kind %v", tt.file, tt.opts.AllowAVPLegacy, err, tt.check, tt.kind)
		}
	}
}

// TestAVPHashData checks the intermediate hashes of the hashData sample
// and re-signs it with the principal's seed.
func TestAVPHashData(t *testing.T) {
	r, err := Verify(readAVP(t, "valid_hashdata.jsonld"), VerifyOptions{Now: avpNow})
	if err != nil {
		t.Fatal(err)
	}
	if r.Construction != W3C || r.Signer != avpPrincipal || !r.IssuerIsSigner {
		t.Errorf("result %+v", r)
	}
	if got := hex.EncodeToString(r.Trace.ProofConfigHash[:]); got != "2b1f05e6005d11362e61bb0ed21363a9b00623ee05f05ff2b5bc1fbdfdfb60c3" {
		t.Errorf("proof config hash %s", got)
	}
	if got := hex.EncodeToString(r.Trace.DocumentHash[:]); got != "f5d123a5c880f2874738c286f60239eb31d09b4604620c45aa6aec4e51da9d42" {
		t.Errorf("document hash %s", got)
	}
	unsigned, err := canonical(without(mustParse(t, readAVP(t, "valid_hashdata.jsonld")), "proof"))
	if err != nil {
		t.Fatal(err)
	}
	_, tr, err := Sign(unsigned, avpKey(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.ProofValue != r.Trace.ProofValue {
		t.Errorf("re-signed proofValue %s, the sample's %s", tr.ProofValue, r.Trace.ProofValue)
	}
}

// TestAVPTamper changes each field of the hashData sample in turn.
func TestAVPTamper(t *testing.T) {
	n := tamperEach(t, readAVP(t, "valid_hashdata.jsonld"), VerifyOptions{Now: avpNow})
	t.Logf("%d one-field tampers, each rejected", n)
}

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }
