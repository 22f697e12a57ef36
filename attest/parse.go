package attest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// Parse decodes an attestation and checks its structure, but not its
// signature (see Attestation.Verify). Decoding is strict: at most
// MaxAttestationSize bytes of one JSON object with no duplicate, re-cased
// or unknown members, valid UTF-8 and bounded nesting. The output is
// replaced by its canonical form.
func Parse(data []byte) (*Attestation, error) {
	a, _, _, err := parse(data)
	return a, err
}

// parse is Parse, also returning the principal's key and the decoded
// signature for a signature check that follows.
func parse(data []byte) (*Attestation, ed25519.PublicKey, []byte, error) {
	if len(data) > MaxAttestationSize {
		return nil, nil, nil, malformed("%d bytes, over the limit of %d", len(data), MaxAttestationSize)
	}
	var a Attestation
	if err := strictjson.Unmarshal(data, &a); err != nil {
		return nil, nil, nil, malformed("%v", err)
	}
	if a.Result.Output != nil {
		c, err := canonicalValue(a.Result.Output)
		if err != nil {
			return nil, nil, nil, malformed("result.output: %v", err)
		}
		a.Result.Output = c
	}
	if err := a.checkLossless(data); err != nil {
		return nil, nil, nil, err
	}
	pub, raw, err := a.checkStructure()
	if err != nil {
		return nil, nil, nil, err
	}
	return &a, pub, raw, nil
}

// checkLossless requires the canonical form of the input to be the
// canonical form of what was decoded. encoding/json reads a null member as
// the zero value or as absent ("outputHash":null as no hash), which would
// then be checked and signed as if it had been written; any such loss is
// refused. (An output of null is a value and is kept.)
func (a *Attestation) checkLossless(data []byte) error {
	want, err := jcs.Transform(data)
	if err != nil {
		return malformed("%v", err)
	}
	got, err := a.canonical()
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return malformed("a member is null or does not keep its value when decoded")
	}
	return nil
}

// Verify checks the attestation's structure and its signature against its
// principal. It does not look at the contract; a Verifier does.
func (a *Attestation) Verify() error {
	pub, raw, err := a.checkStructure()
	if err != nil {
		return err
	}
	return a.checkSignature(pub, raw)
}

// checkSignature checks a structurally valid attestation's signature.
func (a *Attestation) checkSignature(pub ed25519.PublicKey, raw []byte) error {
	payload, err := a.signedPayload()
	if err != nil {
		return err
	}
	if sig.VerifyDigest(pub, sig.Digest(payload), raw) != nil {
		return fmt.Errorf("%w (attestation %s, principal %s)", ErrInvalidSignature, a.ID, a.Principal)
	}
	return nil
}

// Marshal returns the attestation as canonical JSON, signature included.
func (a *Attestation) Marshal() ([]byte, error) {
	if _, _, err := a.checkStructure(); err != nil {
		return nil, err
	}
	return a.canonical()
}

func (a *Attestation) canonical() ([]byte, error) {
	b, err := canon.Marshal(a)
	if err != nil {
		return nil, malformed("canonicalize: %v", err)
	}
	return b, nil
}

// signedPayload is the canonical JSON of the attestation without its
// signature.
func (a *Attestation) signedPayload() ([]byte, error) {
	u := *a
	u.Signature = ""
	return u.canonical()
}

func (a *Attestation) checkStructure() (ed25519.PublicKey, []byte, error) {
	pub, err := a.checkUnsigned()
	if err != nil {
		return nil, nil, err
	}
	raw, err := sig.DecodeSignature(a.Signature)
	if err != nil {
		return nil, nil, malformed("%v", err)
	}
	return pub, raw, nil
}

// checkUnsigned checks every member but the signature and returns the
// principal's public key.
func (a *Attestation) checkUnsigned() (ed25519.PublicKey, error) {
	if !ValidID(a.ID) {
		return nil, malformed("id %q is not %q and 12 lowercase hex digits", clip(a.ID), IDPrefix)
	}
	if a.Version != Version {
		return nil, malformed("version %q, want %q", clip(a.Version), Version)
	}
	if !contract.ValidID(a.ContractID) {
		return nil, malformed("contractId %q is not a contract ID", clip(a.ContractID))
	}
	if a.DelegationID == "" || len(a.DelegationID) > MaxStringLen || !utf8.ValidString(a.DelegationID) {
		return nil, malformed("delegationId must be 1 to %d bytes of UTF-8", MaxStringLen)
	}
	if a.DelegationKey != "" && !validDelegationKey(a.DelegationKey) {
		return nil, malformed("delegationKey %q is not a delegation key (base64url of 32 bytes)", clip(a.DelegationKey))
	}
	pub, err := identity.PublicKey(a.Principal)
	if err != nil {
		return nil, malformed("principal: %v", err)
	}
	if _, err := a.Created(); err != nil {
		return nil, err
	}
	if a.Type != Completion && a.Type != DelegationVerification {
		return nil, malformed("type %q is neither %q nor %q", clip(string(a.Type)), Completion, DelegationVerification)
	}
	if err := a.Result.check(); err != nil {
		return nil, err
	}
	if err := a.checkChildren(); err != nil {
		return nil, err
	}
	return pub, nil
}

func (r *Result) check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"costMicrocents", r.CostMicrocents}, {"durationMs", r.DurationMs}} {
		if f.v < 0 || f.v > canon.MaxSafeInteger {
			return malformed("result.%s %d is outside 0..2^53-1", f.name, f.v)
		}
	}
	var canonical []byte
	if r.Output != nil {
		c, err := canonicalValue(r.Output)
		if err != nil {
			return malformed("result.output: %v", err)
		}
		canonical = c
	}
	if r.OutputHash != nil {
		if !validHash(*r.OutputHash) {
			return malformed("result.outputHash %q is not %q and 64 lowercase hex digits", clip(*r.OutputHash), OutputHashPrefix)
		}
		if canonical != nil && hashCanonical(canonical) != *r.OutputHash {
			return malformed("result.outputHash does not match result.output")
		}
	}
	if o := r.VerificationOutcome; o != nil {
		if o.Method == "" || len(o.Method) > MaxStringLen || !utf8.ValidString(o.Method) {
			return malformed("result.verificationOutcome.method must be 1 to %d bytes of UTF-8", MaxStringLen)
		}
		if o.Score != nil && !(*o.Score >= 0 && *o.Score <= 1) { // NaN too
			return malformed("result.verificationOutcome.score is outside [0, 1]")
		}
		if o.Details != nil && !utf8.ValidString(*o.Details) {
			return malformed("result.verificationOutcome.details is not valid UTF-8")
		}
	}
	return nil
}

func validHash(h string) bool {
	hexPart, ok := strings.CutPrefix(h, OutputHashPrefix)
	if !ok || len(hexPart) != 64 {
		return false
	}
	for _, c := range []byte(hexPart) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (a *Attestation) checkChildren() error {
	ch := a.ChildAttestations
	if ch == nil {
		return malformed("childAttestations is missing")
	}
	if len(ch) > MaxChildren {
		return malformed("%d child attestations, over the limit of %d", len(ch), MaxChildren)
	}
	for i, id := range ch {
		if !ValidID(id) {
			return malformed("childAttestations[%d] %q is not an attestation ID", i, clip(id))
		}
		if id == a.ID {
			return malformed("the attestation lists itself as a child")
		}
		if slices.Contains(ch[:i], id) {
			return malformed("childAttestations lists %s twice", id)
		}
	}
	return nil
}

// validDelegationKey reports whether key is the unpadded base64url of 32
// bytes in its one canonical spelling (as dct.ValidDelegationKey).
func validDelegationKey(key string) bool {
	if len(key) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(key)
	return err == nil && len(b) == 32 && base64.RawURLEncoding.EncodeToString(b) == key
}
