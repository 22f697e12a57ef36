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

// FuzzSignVerify signs any JSON value as a credential's subject and
// verifies the result: what Sign writes, Verify must accept, with the same
// canonical document, whatever numbers, strings and names the value holds.
func FuzzSignVerify(f *testing.F) {
	f.Add([]byte(`{"id":"did:example:x","n":[1,2.5,-0,1e-7,1e21],"s":"\u20ac\n\"","ok":true,"nil":null}`))
	f.Add([]byte(`{"\ud83d\ude00":"emoji","\u0080":"control","é":{"a":[{}]}}`))
	f.Add([]byte(`{"amount":333333333.33333329}`))
	key := testKey(9)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, subject []byte) {
		if len(subject) > 4096 {
			return
		}
		o, err := parseObject(subject)
		if err != nil {
			return
		}
		doc := object{"@context": []any{ContextV2}, "type": []any{TypeCredential}, "issuer": didOf(key), "credentialSubject": o}
		unsigned, err := canonical(doc)
		if err != nil {
			t.Fatal(err)
		}
		signed, tr, err := Sign(unsigned, key, Options{Created: now})
		if err != nil {
			return // nested too deep once wrapped, say
		}
		r, err := Verify(signed, VerifyOptions{Now: now})
		if err != nil {
			t.Fatalf("Sign wrote what Verify refuses: %v\n%s", err, signed)
		}
		if string(r.Trace.CanonicalDocument) != string(tr.CanonicalDocument) || r.Trace.ProofValue != tr.ProofValue {
			t.Fatalf("Verify hashed another document than Sign:\n%s\n%s", r.Trace.CanonicalDocument, tr.CanonicalDocument)
		}
	})
}

// FuzzVerifySigned signs any JSON object as an unsecured document and
// verifies it, so that the checks after the signature (the VC data model,
// AgentDelegation and ReputationCredential rules) see arbitrary documents:
// Verify must not panic, and every failure is an *Error of one kind.
func FuzzVerifySigned(f *testing.F) {
	key := testKey(9)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	receipt, err := IssueDelegationReceipt(key, DelegationReceipt{Delegator: didOf(key), Delegatee: didOf(testKey(2)),
		DelegationID: "del_b0b000000001", Purpose: "p", Categories: []string{"docs:read"}, Outcome: "completed", CompletedAt: issueAt},
		Window{issueAt, issueAt.Add(time.Hour)}, nil)
	if err != nil {
		f.Fatal(err)
	}
	rep, err := IssueReputation(key, Reputation{Agent: didOf(testKey(5)), Profile: "reputation:x", At: issueAt,
		Dimensions: []Score{{Name: "reliability", Score: 0.5, Confidence: 0.1, SampleSize: 1, LastSignal: issueAt}}},
		Window{issueAt, issueAt.Add(time.Hour)}, nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range [][]byte{receipt, rep} {
		o, err := parseObject(b)
		if err != nil {
			f.Fatal(err)
		}
		u, err := canonical(without(o, "proof"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(u)
	}
	f.Add([]byte(`{"@context":[],"type":"VerifiableCredential","issuer":{"id":""},"credentialSubject":[]}`))
	kinds := []error{ErrMalformed, ErrUnsupported, ErrInvalidProof, ErrSignature, ErrUntrustedSigner, ErrExpired, ErrNotYetValid, ErrShape}
	f.Fuzz(func(t *testing.T, unsecured []byte) {
		signed, _, err := Sign(unsecured, key, Options{Created: now})
		if err != nil {
			return
		}
		if _, err := Verify(signed, VerifyOptions{Now: now}); err != nil {
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
		}
	})
}
