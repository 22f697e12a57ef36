package credential

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// Construction says how a verified proof's signature was computed.
type Construction string

const (
	// W3C is eddsa-jcs-2022: Ed25519 over hashData.
	W3C Construction = "eddsa-jcs-2022"
	// AVPLegacy is AVP's first construction: Ed25519 over the document's
	// JCS alone; accepted only with VerifyOptions.AllowAVPLegacy.
	AVPLegacy Construction = "avp-legacy-jcs"
)

// VerifyOptions are what a verifier expects. The zero value verifies any
// eddsa-jcs-2022 credential signed by any did:key, as of now.
type VerifyOptions struct {
	// Now is the time the validity window and the proof's expires are
	// judged at; zero means time.Now().
	Now time.Time
	// ClockSkew is how long before validFrom a credential is accepted;
	// zero means DefaultClockSkew, negative means none.
	ClockSkew time.Duration
	// Signer, if set, is the did:key the proof must be by.
	Signer string
	// AllowAVPLegacy accepts a proof in AVP's legacy construction (see the
	// package documentation) as well.
	AllowAVPLegacy bool
}

// Check is one check that passed, for reports.
type Check struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// Result describes a verified credential. Verify also returns it, with the
// checks passed so far, when a check fails after the document was read.
type Result struct {
	// ID is the credential's id, if it has one.
	ID string `json:"id,omitempty"`
	// Types is the credential's type list.
	Types []string `json:"types,omitempty"`
	// Issuer is the issuer (or issuer.id).
	Issuer string `json:"issuer,omitempty"`
	// Signer is the did:key the verificationMethod names.
	Signer             string `json:"signer,omitempty"`
	VerificationMethod string `json:"verificationMethod,omitempty"`
	// IssuerIsSigner reports whether Issuer is Signer.
	IssuerIsSigner bool         `json:"issuerIsSigner"`
	Construction   Construction `json:"construction,omitempty"`
	ProofPurpose   string       `json:"proofPurpose,omitempty"`
	// Created, Expires, ValidFrom and ValidUntil are zero when absent.
	Created    time.Time `json:"created,omitzero"`
	Expires    time.Time `json:"expires,omitzero"`
	ValidFrom  time.Time `json:"validFrom,omitzero"`
	ValidUntil time.Time `json:"validUntil,omitzero"`
	// Digest is the lowercase hex SHA-256 of the whole secured document's
	// JCS form, proof included: what AVP links a delegation receipt by.
	Digest string `json:"digest,omitempty"`
	// Checks lists the checks passed, in order.
	Checks []Check `json:"checks"`
	// Subject is the credentialSubject in RFC 8785 form.
	Subject []byte `json:"-"`
	// Trace holds the proof's intermediate values.
	Trace *Trace `json:"-"`
}

func (r *Result) pass(name, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Detail: fmt.Sprintf(format, args...)})
}

// proofMembers are the members a Data Integrity proof of this cryptosuite
// may have; previousProof (proof chains) is refused on its own.
var proofMembers = map[string]bool{
	"@context": true, "id": true, "type": true, "cryptosuite": true, "verificationMethod": true,
	"proofPurpose": true, "proofValue": true, "created": true, "expires": true,
	"domain": true, "challenge": true, "nonce": true,
}

// legacyProofMembers are the only members of a legacy AVP proof.
var legacyProofMembers = []string{"cryptosuite", "proofValue", "type", "verificationMethod"}

// Verify verifies a secured credential: its proof, its shape as a VC 2.0
// credential, its validity window and, for types this package knows, their
// rules. The error is an *Error naming the failed check.
func Verify(data []byte, opts VerifyOptions) (*Result, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	skew := opts.ClockSkew
	if skew == 0 {
		skew = DefaultClockSkew
	} else if skew < 0 {
		skew = 0
	}
	doc, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	r := &Result{}
	r.pass("json", "%d bytes of strict JSON: no duplicate members, valid UTF-8, integers within ±(2^53-1)", len(data))
	whole, err := canonical(doc)
	if err != nil {
		return r, fail("json", ErrMalformed, "%v", err)
	}
	sum := sha256.Sum256(whole)
	r.Digest = hex.EncodeToString(sum[:])

	proof, err := proofOf(doc)
	if err != nil {
		return r, err
	}
	unsecured := without(doc, "proof")
	if err := checkProofHeader(proof, r); err != nil {
		return r, err
	}
	pub, err := verificationKey(proof, r)
	if err != nil {
		return r, err
	}
	sig, err := proofValue(proof, r)
	if err != nil {
		return r, err
	}
	if _, ok := proof["proofPurpose"]; !ok {
		err = verifyLegacy(unsecured, proof, pub, sig, opts.AllowAVPLegacy, r)
	} else {
		err = verifyW3C(unsecured, proof, pub, sig, now, r)
	}
	if err != nil {
		return r, err
	}
	if opts.Signer != "" && opts.Signer != r.Signer {
		return r, fail("signer", ErrUntrustedSigner, "signed by %s, not by %s", r.Signer, quote(opts.Signer))
	}
	if err := checkCredential(unsecured, r); err != nil {
		return r, err
	}
	if err := checkValidity(r, now, skew); err != nil {
		return r, err
	}
	if contains(r.Types, TypeAgentDelegation) {
		if err := checkDelegationReceipt(doc, r); err != nil {
			return r, err
		}
	}
	if contains(r.Types, TypeReputation) {
		if err := checkReputation(doc, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// proofOf returns the document's one proof.
func proofOf(doc object) (object, error) {
	v, ok := doc["proof"]
	if !ok {
		return nil, fail("proof", ErrMalformed, "the document has no proof")
	}
	switch p := v.(type) {
	case object:
		if _, ok := p["previousProof"]; ok {
			return nil, fail("proof", ErrUnsupported, "the proof has previousProof: proof chains are not supported")
		}
		for _, k := range sortedKeys(p) {
			if !proofMembers[k] {
				return nil, fail("proof", ErrUnsupported, "member %s is not one a Data Integrity proof of %s has", quote(k), Cryptosuite)
			}
		}
		return p, nil
	case []any:
		return nil, fail("proof", ErrUnsupported, "proof is an array of %d proofs: proof sets are not supported", len(p))
	}
	return nil, fail("proof", ErrMalformed, "proof is %s, not an object", kindOf(v))
}

// checkProofHeader checks the proof's type and cryptosuite.
func checkProofHeader(proof object, r *Result) error {
	typ, ok, err := stringMember(proof, "proof", "type")
	if err != nil {
		return err
	}
	if !ok || typ != ProofType {
		return fail("proof", ErrUnsupported, "type is %s, want %s", presentOr(typ, ok), ProofType)
	}
	suite, ok, err := stringMember(proof, "proof", "cryptosuite")
	if err != nil {
		return err
	}
	if !ok || suite != Cryptosuite {
		return fail("proof", ErrUnsupported, "cryptosuite is %s, want %s", presentOr(suite, ok), Cryptosuite)
	}
	return nil
}

func presentOr(s string, present bool) string {
	if !present {
		return "missing"
	}
	return quote(s)
}

// verificationKey reads the verificationMethod: did:key:zX#zX, nothing
// else, and returns its Ed25519 key.
func verificationKey(proof object, r *Result) (ed25519.PublicKey, error) {
	vm, ok, err := stringMember(proof, "verificationMethod", "verificationMethod")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fail("verificationMethod", ErrMalformed, "the proof has no verificationMethod")
	}
	did, frag, hasFrag := strings.Cut(vm, "#")
	if !strings.HasPrefix(did, identity.DIDPrefix) {
		return nil, fail("verificationMethod", ErrUnsupported, "%s is not a did:key (keys are never fetched; only did:key:z… is verified)", quote(vm))
	}
	pub, err := identity.PublicKeyFromDID(did)
	if err != nil {
		return nil, fail("verificationMethod", ErrUnsupported, "%v", err)
	}
	if !hasFrag || frag != did[len("did:key:"):] {
		return nil, fail("verificationMethod", ErrUnsupported, "%s: a did:key's verification method is the DID, '#' and its multibase key again (%s)", quote(vm), VerificationMethod(did))
	}
	r.Signer, r.VerificationMethod = did, vm
	r.pass("verificationMethod", "%s: Ed25519 did:key", vm)
	return pub, nil
}

// proofValue decodes proofValue: 'z', then base58btc of 64 bytes.
func proofValue(proof object, r *Result) ([]byte, error) {
	pv, ok, err := stringMember(proof, "proofValue", "proofValue")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fail("proofValue", ErrMalformed, "the proof has no proofValue")
	}
	if len(pv) > maxProofValueLen || !strings.HasPrefix(pv, "z") {
		return nil, fail("proofValue", ErrMalformed, "%s is not 'z' and the base58btc of a 64-byte signature", quote(pv))
	}
	sig, err := identity.Base58Decode(pv[1:])
	if err != nil {
		return nil, fail("proofValue", ErrMalformed, "%s: %v", quote(pv), err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fail("proofValue", ErrMalformed, "decodes to %d bytes, not a 64-byte Ed25519 signature", len(sig))
	}
	return sig, nil
}

// verifyW3C verifies an eddsa-jcs-2022 proof (vc-di-eddsa §3.3.2).
func verifyW3C(unsecured, proof object, pub ed25519.PublicKey, sig []byte, now time.Time, r *Result) error {
	purpose, _, err := stringMember(proof, "proofPurpose", "proofPurpose")
	if err != nil {
		return err
	}
	if purpose != PurposeAssertion {
		return fail("proofPurpose", ErrInvalidProof, "%s; a credential is verified for %s", quote(purpose), PurposeAssertion)
	}
	r.ProofPurpose = purpose
	for _, name := range []string{"created", "expires"} {
		s, ok, err := stringMember(proof, "proof", name)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		t, err := parseDateTime(s)
		if err != nil {
			return fail("proof", ErrInvalidProof, "%s: %v", name, err)
		}
		if name == "created" {
			r.Created = t
		} else {
			r.Expires = t
		}
	}
	for _, name := range []string{"id", "challenge", "nonce"} {
		if _, _, err := stringMember(proof, "proof", name); err != nil {
			return err
		}
	}
	if err := checkDomain(proof); err != nil {
		return err
	}
	if err := checkProofContext(unsecured, proof, r); err != nil {
		return err
	}
	tr, err := hashData(unsecured, without(proof, "proofValue"))
	if err != nil {
		return err
	}
	tr.Signature, tr.ProofValue = sig, proof["proofValue"].(string)
	r.Trace = tr
	if !ed25519.Verify(pub, tr.HashData, sig) {
		return fail("signature", ErrSignature, "Ed25519 over SHA-256(proof config) %x… ‖ SHA-256(document) %x… does not verify under %s",
			tr.ProofConfigHash[:8], tr.DocumentHash[:8], r.Signer)
	}
	r.Construction = W3C
	r.pass("signature", "Ed25519 over SHA-256(JCS(proof config)) ‖ SHA-256(JCS(document)) (%s)", Cryptosuite)
	if !r.Expires.IsZero() && now.After(r.Expires) {
		return fail("proof", ErrExpired, "the proof expired at %s (now %s)", FormatTime(r.Expires), FormatTime(now))
	}
	detail := "purpose " + purpose
	if !r.Created.IsZero() {
		detail += ", created " + FormatTime(r.Created)
	}
	if !r.Expires.IsZero() {
		detail += ", expires " + FormatTime(r.Expires)
	}
	r.pass("proof", "%s", detail)
	return nil
}

// checkDomain checks domain: a string or an array of strings.
func checkDomain(proof object) error {
	v, ok := proof["domain"]
	if !ok {
		return nil
	}
	switch d := v.(type) {
	case string:
		return nil
	case []any:
		for _, e := range d {
			if _, ok := e.(string); !ok {
				return fail("proof", ErrMalformed, "domain holds %s, not only strings", kindOf(e))
			}
		}
		return nil
	}
	return fail("proof", ErrMalformed, "domain is %s, not a string or an array of strings", kindOf(v))
}

// checkProofContext holds the proof's @context to the document's.
func checkProofContext(unsecured, proof object, r *Result) error {
	pc, ok := proof["@context"]
	if !ok {
		r.pass("@context", "the proof has no @context; the document's is covered by its hash")
		return nil
	}
	dc, ok := unsecured["@context"]
	if !ok {
		return fail("@context", ErrInvalidProof, "the proof has an @context and the document none")
	}
	pl, dl := contextList(pc), contextList(dc)
	if len(pl) > len(dl) {
		return fail("@context", ErrInvalidProof, "the proof's @context has %d entries, the document's %d", len(pl), len(dl))
	}
	for i := range pl {
		a, err := canonical(pl[i])
		if err != nil {
			return fail("@context", ErrMalformed, "%v", err)
		}
		b, err := canonical(dl[i])
		if err != nil {
			return fail("@context", ErrMalformed, "%v", err)
		}
		if !bytes.Equal(a, b) {
			return fail("@context", ErrInvalidProof, "entry %d differs: the document's @context does not start with the proof's", i)
		}
	}
	if len(dl) > len(pl) {
		return fail("@context", ErrInvalidProof, "the document's @context has %d entries the proof does not cover (added after signing?)", len(dl)-len(pl))
	}
	r.pass("@context", "the proof's @context is the document's (%d entries)", len(pl))
	return nil
}

// contextList reads an @context as its entries.
func contextList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// verifyLegacy verifies AVP's legacy construction when allowed.
func verifyLegacy(unsecured, proof object, pub ed25519.PublicKey, sig []byte, allow bool, r *Result) error {
	if !allow {
		return fail("proofPurpose", ErrUnsupported, "the proof has no proofPurpose: it is AVP's legacy construction (Ed25519 over JCS(document) alone), which %s does not define; accept it only on purpose (AllowAVPLegacy, --avp-legacy)", Cryptosuite)
	}
	if keys := sortedKeys(proof); strings.Join(keys, ",") != strings.Join(legacyProofMembers, ",") {
		return fail("proof", ErrInvalidProof, "a legacy proof has exactly %s, this one %s", strings.Join(legacyProofMembers, ", "), strings.Join(keys, ", "))
	}
	cd, err := canonical(unsecured)
	if err != nil {
		return fail("document", ErrMalformed, "%v", err)
	}
	tr := &Trace{CanonicalDocument: cd, DocumentHash: sha256.Sum256(cd), HashData: cd, Signature: sig, ProofValue: proof["proofValue"].(string)}
	r.Trace = tr
	if !ed25519.Verify(pub, cd, sig) {
		return fail("signature", ErrSignature, "Ed25519 over JCS(document) (AVP legacy) does not verify under %s", r.Signer)
	}
	r.Construction = AVPLegacy
	r.pass("signature", "Ed25519 over JCS(document): AVP's legacy construction, accepted on request; not %s", Cryptosuite)
	return nil
}

func sortedKeys(o object) []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
