package credential

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// signRaw signs doc with proof as given (no member added), for documents
// Sign would not write.
func signRaw(t *testing.T, doc, proof object, key ed25519.PrivateKey) []byte {
	t.Helper()
	tr, err := hashData(without(doc, "proof"), without(proof, "proofValue"))
	if err != nil {
		t.Fatal(err)
	}
	p := deepCopy(proof).(object)
	p["proofValue"] = "z" + encodeB58(ed25519.Sign(key, tr.HashData))
	d := deepCopy(doc).(object)
	d["proof"] = p
	b, err := canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerifyRules checks each rule on a document signed as it stands, so
// that the rule, not the signature, is what refuses it.
func TestVerifyRules(t *testing.T) {
	key := testKey(7)
	did := didOf(key)
	base := func() (object, object) {
		doc := object{
			"@context": []any{ContextV2}, "type": []any{TypeCredential}, "issuer": did,
			"validFrom": "2026-01-01T00:00:00Z", "credentialSubject": object{"id": "did:example:x"},
		}
		proof := object{"type": ProofType, "cryptosuite": Cryptosuite, "verificationMethod": VerificationMethod(did),
			"proofPurpose": PurposeAssertion, "@context": []any{ContextV2}}
		return doc, proof
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	other := didOf(testKey(8))
	tests := []struct {
		name  string
		edit  func(doc, proof object)
		check string
		kind  error
	}{
		{"as signed", func(doc, proof object) {}, "", nil},
		{"no proof @context", func(doc, proof object) { delete(proof, "@context") }, "", nil},
		{"proof id, domain, challenge, nonce", func(doc, proof object) {
			proof["id"], proof["domain"], proof["challenge"], proof["nonce"] = "urn:x", []any{"a.example"}, "c", "n"
		}, "", nil},
		{"issuer object", func(doc, proof object) { doc["issuer"] = object{"id": did, "name": "x"} }, "", nil},
		{"did:web", func(doc, proof object) { proof["verificationMethod"] = "did:web:example.com#key-1" }, "verificationMethod", ErrUnsupported},
		{"https URL", func(doc, proof object) { proof["verificationMethod"] = "https://example.com/keys/1" }, "verificationMethod", ErrUnsupported},
		{"no fragment", func(doc, proof object) { proof["verificationMethod"] = did }, "verificationMethod", ErrUnsupported},
		{"another key's fragment", func(doc, proof object) { proof["verificationMethod"] = did + "#" + other[len("did:key:"):] }, "verificationMethod", ErrUnsupported},
		{"named fragment", func(doc, proof object) { proof["verificationMethod"] = did + "#key-1" }, "verificationMethod", ErrUnsupported},
		{"secp256k1 did:key", func(doc, proof object) {
			proof["verificationMethod"] = "did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme#zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme"
		}, "verificationMethod", ErrUnsupported},
		{"verificationMethod a number", func(doc, proof object) { proof["verificationMethod"] = 1.0 }, "verificationMethod", ErrMalformed},
		{"proof set", func(doc, proof object) { doc["proof"] = []any{proof, proof} }, "proof", ErrUnsupported},
		{"proof chain", func(doc, proof object) { proof["previousProof"] = "urn:p" }, "proof", ErrUnsupported},
		{"Ed25519Signature2020", func(doc, proof object) { proof["type"] = "Ed25519Signature2020" }, "proof", ErrUnsupported},
		{"eddsa-rdfc-2022", func(doc, proof object) { proof["cryptosuite"] = "eddsa-rdfc-2022" }, "proof", ErrUnsupported},
		{"authentication", func(doc, proof object) { proof["proofPurpose"] = "authentication" }, "proofPurpose", ErrInvalidProof},
		{"created a date", func(doc, proof object) { proof["created"] = "2026-01-01" }, "proof", ErrInvalidProof},
		{"created without zone", func(doc, proof object) { proof["created"] = "2026-01-01T00:00:00" }, "proof", ErrInvalidProof},
		{"created zone +25:00", func(doc, proof object) { proof["created"] = "2026-01-01T00:00:00+25:00" }, "proof", ErrInvalidProof},
		{"created February 30", func(doc, proof object) { proof["created"] = "2026-02-30T00:00:00Z" }, "proof", ErrInvalidProof},
		{"proof expired", func(doc, proof object) { proof["expires"] = "2026-05-31T23:59:59Z" }, "proof", ErrExpired},
		{"domain a number", func(doc, proof object) { proof["domain"] = 1.0 }, "proof", ErrMalformed},
		{"proof @context a prefix", func(doc, proof object) { doc["@context"] = []any{ContextV2, "https://example.com/x"} }, "@context", ErrInvalidProof},
		{"proof @context, document none", func(doc, proof object) { delete(doc, "@context") }, "@context", ErrInvalidProof},
		{"VC 1.1", func(doc, proof object) {
			doc["@context"] = []any{"https://www.w3.org/2018/credentials/v1"}
			proof["@context"] = doc["@context"]
		}, "credential", ErrUnsupported},
		{"not a credential", func(doc, proof object) { doc["type"] = []any{"Thing"} }, "credential", ErrShape},
		{"no issuer", func(doc, proof object) { delete(doc, "issuer") }, "credential", ErrShape},
		{"no subject", func(doc, proof object) { delete(doc, "credentialSubject") }, "credential", ErrShape},
		{"subject a string", func(doc, proof object) { doc["credentialSubject"] = "x" }, "credential", ErrShape},
		{"validUntil before validFrom", func(doc, proof object) { doc["validUntil"] = "2025-01-01T00:00:00Z" }, "credential", ErrShape},
		{"expired", func(doc, proof object) { doc["validUntil"] = "2026-05-01T00:00:00Z" }, "validity", ErrExpired},
		{"not yet valid", func(doc, proof object) { doc["validFrom"] = "2026-07-01T00:00:00Z" }, "validity", ErrNotYetValid},
		{"reputation score above 1", func(doc, proof object) {
			doc["type"] = []any{TypeCredential, TypeReputation}
			doc["credentialSubject"] = object{"id": "did:example:x", "domains": []any{}, "dimensions": []any{
				object{"name": "reliability", "score": 1.5, "confidence": 0.5, "sampleSize": 3.0, "lastSignal": "2026-01-01T00:00:00Z"}}}
		}, "reputation", ErrShape},
		{"reputation without domains", func(doc, proof object) {
			doc["type"] = []any{TypeCredential, TypeReputation}
			doc["credentialSubject"] = object{"id": "did:example:x", "dimensions": []any{}}
		}, "reputation", ErrShape},
		{"AgentDelegation without its context", func(doc, proof object) {
			doc["type"] = []any{TypeCredential, TypeAgentDelegation}
		}, "delegation receipt", ErrShape},
	}
	for _, tt := range tests {
		doc, proof := base()
		tt.edit(doc, proof)
		var b []byte
		if p, ok := doc["proof"]; ok {
			// The edit placed the proof itself (a proof set).
			_ = p
			var err error
			if b, err = canonical(doc); err != nil {
				t.Fatal(err)
			}
		} else {
			b = signRaw(t, doc, proof, key)
		}
		_, err := Verify(b, VerifyOptions{Now: now})
		if tt.check == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var e *Error
		if !isKind(err, tt.kind) || !errorAs(err, &e) || e.Check != tt.check {
			t.Errorf("%s: %v, want check %q kind %v", tt.name, err, tt.check, tt.kind)
		}
	}
}

func encodeB58(b []byte) string { return identity.Base58Encode(b) }
