package credential

import (
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// redDoc is a credential issued by did, and a proof by did to sign it with.
func redDoc(did string) (object, object) {
	doc := object{
		"@context": []any{ContextV2}, "type": []any{TypeCredential}, "issuer": did,
		"validFrom": "2026-01-01T00:00:00Z", "credentialSubject": object{"id": "did:example:x"},
	}
	proof := object{"type": ProofType, "cryptosuite": Cryptosuite, "verificationMethod": VerificationMethod(did),
		"proofPurpose": PurposeAssertion}
	return doc, proof
}

var redNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// TestVerifyEmptyContextArray: a document signed with "@context": [] is
// refused as a credential, not a panic.
func TestVerifyEmptyContextArray(t *testing.T) {
	key := testKey(7)
	for _, withProofContext := range []bool{false, true} {
		doc, proof := redDoc(didOf(key))
		doc["@context"] = []any{}
		if withProofContext {
			proof["@context"] = []any{}
		}
		b := signRaw(t, doc, proof, key)
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("Verify panicked: %v", p)
				}
			}()
			_, err = Verify(b, VerifyOptions{Now: redNow})
		}()
		var e *Error
		if !isKind(err, ErrShape) || !errorAs(err, &e) || e.Check != "credential" {
			t.Errorf("proof @context %v: %v, want a credential shape error", withProofContext, err)
		}
	}
}

// smallOrderKeys are a few keys of small order: identity.SmallOrder's
// tests cover every encoding; these show a credential is refused with them.
var smallOrderKeys = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // identity
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // identity, y = p+1, x sign set
}

// TestVerifySmallOrderKey: under a key of small order a signature proves
// nothing (with the identity point, R = identity and S = 0 verify every
// message), so a did:key of such a key is refused before any signature.
func TestVerifySmallOrderKey(t *testing.T) {
	for _, h := range smallOrderKeys {
		pub, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		did := identity.DIDFromPublicKey(ed25519.PublicKey(pub))
		doc, proof := redDoc(did)
		// The forgery that holds under the identity point for any message.
		sig := make([]byte, 64)
		sig[0] = 1
		d := deepCopy(doc).(object)
		p := deepCopy(proof).(object)
		p["proofValue"] = "z" + encodeB58(sig)
		d["proof"] = p
		b, err := canonical(d)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Verify(b, VerifyOptions{Now: redNow})
		var e *Error
		if !isKind(err, ErrUnsupported) || !errorAs(err, &e) || e.Check != "verificationMethod" {
			t.Errorf("key %s: %v, want a verificationMethod error", h, err)
		}
	}
	// An ordinary key still verifies.
	key := testKey(7)
	doc, proof := redDoc(didOf(key))
	if _, err := Verify(signRaw(t, doc, proof, key), VerifyOptions{Now: redNow}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyDIDKeyIssuerNotSigner: an issuer that is a did:key is that key
// alone, so a proof by another key cannot be the issuer's; such a
// credential is refused. An issuer that is not a did:key (a URL, as in the
// W3C vectors) is still only reported.
func TestVerifyDIDKeyIssuerNotSigner(t *testing.T) {
	signer, victim := testKey(7), testKey(8)
	upper := "DID:KEY:" + didOf(victim)[len("did:key:"):]
	for _, issuer := range []any{didOf(victim), object{"id": didOf(victim)}, upper, didOf(signer) + "#x"} {
		doc, proof := redDoc(didOf(signer))
		doc["issuer"] = issuer
		_, err := Verify(signRaw(t, doc, proof, signer), VerifyOptions{Now: redNow})
		var e *Error
		if !isKind(err, ErrShape) || !errorAs(err, &e) || e.Check != "credential" {
			t.Errorf("issuer %v signed by another did:key: %v, want a credential shape error", issuer, err)
		}
	}
	doc, proof := redDoc(didOf(signer))
	doc["issuer"] = "https://issuer.example/1"
	r, err := Verify(signRaw(t, doc, proof, signer), VerifyOptions{Now: redNow})
	if err != nil || r.IssuerIsSigner {
		t.Errorf("URL issuer: %v, IssuerIsSigner %v", err, r != nil && r.IssuerIsSigner)
	}
}

// TestVerifyReputationIssuerIsSigner: a ReputationCredential is held to the
// shape IssueReputation writes, whose issuer is the signing did:key; one
// naming another issuer (a URL the key need not belong to) is refused.
func TestVerifyReputationIssuerIsSigner(t *testing.T) {
	key := testKey(4)
	doc, proof := redDoc(didOf(key))
	doc["type"] = []any{TypeCredential, TypeReputation}
	doc["issuer"] = "https://reputation.example/issuer"
	doc["credentialSubject"] = object{"id": didOf(testKey(5)), "domains": []any{}, "dimensions": []any{
		object{"name": "reliability", "score": 0.99, "confidence": 0.9, "sampleSize": 100.0, "lastSignal": "2026-01-01T00:00:00Z"}}}
	_, err := Verify(signRaw(t, doc, proof, key), VerifyOptions{Now: redNow})
	var e *Error
	if !isKind(err, ErrShape) || !errorAs(err, &e) || e.Check != "reputation" {
		t.Errorf("reputation issued by a URL, signed by a did:key: %v, want a reputation shape error", err)
	}
	doc["issuer"] = didOf(key)
	if _, err := Verify(signRaw(t, doc, proof, key), VerifyOptions{Now: redNow}); err != nil {
		t.Errorf("issued by the signer: %v", err)
	}
}

// TestVerifyRefusesAlteredCredentials pins what was tried against Verify and found
// refused: each change is to a credential that verifies as signed.
// (Was TestVerifyRedTeamRefusals.)
func TestVerifyRefusesAlteredCredentials(t *testing.T) {
	key := testKey(7)
	did := didOf(key)
	mb := did[len("did:key:"):]
	doc, proof := redDoc(did)
	signed := signRaw(t, doc, proof, key)
	if _, err := Verify(signed, VerifyOptions{Now: redNow}); err != nil {
		t.Fatal(err)
	}
	o, err := parseObject(signed)
	if err != nil {
		t.Fatal(err)
	}
	pv := o["proof"].(object)["proofValue"].(string)
	sig, err := identity.Base58Decode(pv[1:])
	if err != nil {
		t.Fatal(err)
	}
	// S + L, the same signature with a non-canonical S.
	l := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	highS := append([]byte(nil), sig...)
	carry := 0
	for i := 0; i < 32; i++ {
		v := int(highS[32+i]) + int(l[i]) + carry
		highS[32+i], carry = byte(v), v>>8
	}
	tests := []struct {
		name  string
		edit  func(p object)
		check string
	}{
		{"S + L", func(p object) { p["proofValue"] = "z" + encodeB58(highS) }, "signature"},
		{"a leading zero byte more", func(p object) { p["proofValue"] = "z1" + pv[1:] }, "proofValue"},
		{"multibase base64url", func(p object) { p["proofValue"] = "u" + pv[1:] }, "proofValue"},
		{"multibase Z", func(p object) { p["proofValue"] = "Z" + pv[1:] }, "proofValue"},
		{"no multibase prefix", func(p object) { p["proofValue"] = pv[1:] }, "proofValue"},
		{"DID upper case", func(p object) { p["verificationMethod"] = "DID:KEY:" + mb + "#" + mb }, "verificationMethod"},
		{"query", func(p object) { p["verificationMethod"] = did + "?versionId=1#" + mb }, "verificationMethod"},
		{"percent-encoded colon", func(p object) { p["verificationMethod"] = "did%3Akey%3A" + mb + "#" + mb }, "verificationMethod"},
		{"percent-encoded fragment", func(p object) { p["verificationMethod"] = did + "%23" + mb }, "verificationMethod"},
		{"two fragments", func(p object) { p["verificationMethod"] = did + "#" + mb + "#" + mb }, "verificationMethod"},
		{"fragment in upper case", func(p object) { p["verificationMethod"] = did + "#" + strings.ToUpper(mb) }, "verificationMethod"},
		{"proof set of one", func(p object) {}, "proof"},
	}
	for _, tt := range tests {
		d := deepCopy(o).(object)
		p := d["proof"].(object)
		tt.edit(p)
		if tt.name == "proof set of one" {
			d["proof"] = []any{p}
		}
		b, err := canonical(d)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Verify(b, VerifyOptions{Now: redNow})
		var e *Error
		if err == nil || !errorAs(err, &e) || e.Check != tt.check {
			t.Errorf("%s: %v, want a %s error", tt.name, err, tt.check)
		}
	}
}

// TestVerifyDelegationReceiptDelegatorIsIssuer: a DelegationReceipt this
// package issues names its issuer as credentialSubject.delegator; one that
// names another delegator than the key that signs is refused, so that no
// key can state that someone else delegated.
func TestVerifyDelegationReceiptDelegatorIsIssuer(t *testing.T) {
	mallory, victim := testKey(7), testKey(8)
	b := testReceipt(t, mallory)
	o, err := parseObject(b)
	if err != nil {
		t.Fatal(err)
	}
	doc := without(o, "proof")
	proof := without(o["proof"].(object), "proofValue")
	now := issueAt.Add(time.Minute)
	if _, err := Verify(signRaw(t, doc, proof, mallory), VerifyOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	for _, delegator := range []any{didOf(victim), 1.0, nil} {
		d := deepCopy(doc).(object)
		d["credentialSubject"].(object)["delegator"] = delegator
		_, err := Verify(signRaw(t, d, proof, mallory), VerifyOptions{Now: now})
		var e *Error
		if !isKind(err, ErrShape) || !errorAs(err, &e) || e.Check != "delegation receipt" {
			t.Errorf("delegator %v: %v, want a delegation receipt shape error", delegator, err)
		}
	}
}
