package credential

import (
	"errors"
	"testing"
	"time"
)

// FuzzVerify feeds Verify arbitrary bytes, seeded with the vectors: it must
// not panic, every failure must be an *Error of one kind, and what verifies
// must verify again from its canonical form.
func FuzzVerify(f *testing.F) {
	for _, name := range []string{"signedJCS.json", "unsigned.json", "proofConfigJCS.json"} {
		b, err := readFile(w3cDir + "/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, name := range []string{"valid.json", "valid_hashdata.jsonld", "expired.json", "tampered.json"} {
		b, err := readFile("testdata/avp/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"proof":[{}]}`))
	f.Add([]byte(`{"proof":{"type":"DataIntegrityProof","cryptosuite":"eddsa-jcs-2022","verificationMethod":"did:key:z6Mk#z6Mk","proofValue":"z1"}}`))
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	kinds := []error{ErrMalformed, ErrUnsupported, ErrInvalidProof, ErrSignature, ErrUntrustedSigner, ErrExpired, ErrNotYetValid, ErrShape}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, legacy := range []bool{false, true} {
			r, err := Verify(data, VerifyOptions{Now: now, AllowAVPLegacy: legacy})
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Check == "" {
					t.Fatalf("error %v is not an *Error naming its check", err)
				}
				n := 0
				for _, k := range kinds {
					if errors.Is(err, k) {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("error %v is of %d kinds", err, n)
				}
				continue
			}
			if r.Signer == "" || r.Trace == nil || len(r.Trace.Signature) != 64 {
				t.Fatalf("verified without a signer or signature: %+v", r)
			}
			o, err := parseObject(data)
			if err != nil {
				t.Fatal(err)
			}
			c, err := canonical(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(c, VerifyOptions{Now: now, AllowAVPLegacy: legacy}); err != nil {
				t.Fatalf("verified, but not in canonical form: %v", err)
			}
		}
	})
}
