package credential

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// The identifiers this package signs and verifies with.
const (
	// ContextV2 is the VC 2.0 base context, first in every credential.
	ContextV2 = "https://www.w3.org/ns/credentials/v2"
	// ProofType is the Data Integrity proof type.
	ProofType = "DataIntegrityProof"
	// Cryptosuite is the only cryptosuite: EdDSA over JCS.
	Cryptosuite = "eddsa-jcs-2022"
	// PurposeAssertion is the proof purpose of a credential's proof.
	PurposeAssertion = "assertionMethod"
)

// Trace is every intermediate value of a proof, in the order the
// cryptosuite computes them.
type Trace struct {
	// CanonicalDocument is JCS(document without proof).
	CanonicalDocument []byte
	// CanonicalProofConfig is JCS(proof without proofValue), @context
	// included. Empty for AVP's legacy construction.
	CanonicalProofConfig []byte
	DocumentHash         [32]byte
	ProofConfigHash      [32]byte
	// HashData is what Ed25519 signs: ProofConfigHash ‖ DocumentHash (for
	// the legacy construction, CanonicalDocument itself).
	HashData []byte
	// Signature is the 64-byte Ed25519 signature.
	Signature []byte
	// ProofValue is 'z' and the base58btc of Signature.
	ProofValue string
}

// Options are the proof options Sign takes.
type Options struct {
	// Created is the proof's created time, written to the second; zero
	// leaves created out.
	Created time.Time
	// Expires is the proof's expires time, written to the second; zero
	// leaves it out.
	Expires time.Time
}

// VerificationMethod returns the verification method of a did:key:
// the DID, '#', and its multibase key again.
func VerificationMethod(did string) string {
	return did + "#" + strings.TrimPrefix(did, "did:key:")
}

// Sign secures an unsecured document (a JSON object without proof) with an
// eddsa-jcs-2022 proof by key, whose verification method is key's did:key.
// It returns the secured document in RFC 8785 form and the trace.
func Sign(unsecured []byte, key ed25519.PrivateKey, opts Options) ([]byte, *Trace, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, nil, errors.New("credential: Sign: the key is not an Ed25519 private key")
	}
	doc, err := parseObject(unsecured)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := doc["proof"]; ok {
		return nil, nil, fail("proof", ErrUnsupported, "the document already has a proof; proof sets are not supported")
	}
	did := identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey))
	proof := object{
		"type":               ProofType,
		"cryptosuite":        Cryptosuite,
		"verificationMethod": VerificationMethod(did),
		"proofPurpose":       PurposeAssertion,
	}
	if !opts.Created.IsZero() {
		proof["created"] = FormatTime(opts.Created)
	}
	if !opts.Expires.IsZero() {
		proof["expires"] = FormatTime(opts.Expires)
	}
	if ctx, ok := doc["@context"]; ok {
		proof["@context"] = ctx
	}
	tr, err := hashData(doc, proof)
	if err != nil {
		return nil, nil, err
	}
	tr.Signature = ed25519.Sign(key, tr.HashData)
	tr.ProofValue = "z" + identity.Base58Encode(tr.Signature)
	proof["proofValue"] = tr.ProofValue
	doc["proof"] = proof
	out, err := canonical(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("credential: %w", err)
	}
	return out, tr, nil
}

// hashData canonicalizes and hashes an unsecured document and a proof
// configuration (the proof without proofValue).
func hashData(doc, proofConfig object) (*Trace, error) {
	cd, err := canonical(doc)
	if err != nil {
		return nil, fail("document", ErrMalformed, "%v", err)
	}
	cp, err := canonical(proofConfig)
	if err != nil {
		return nil, fail("proof", ErrMalformed, "%v", err)
	}
	tr := &Trace{CanonicalDocument: cd, CanonicalProofConfig: cp,
		DocumentHash: sha256.Sum256(cd), ProofConfigHash: sha256.Sum256(cp)}
	tr.HashData = append(append(make([]byte, 0, 64), tr.ProofConfigHash[:]...), tr.DocumentHash[:]...)
	return tr, nil
}
