package reputation

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/delegateos/delegateos/identity"
)

// AVP peer attestations (avp-agent-verification §attestations, as the AVP
// SDK signs them) are one agent's signed rating of an interaction with
// another. This workspace records each verified attestation as one signal
// of the attested agent:
//
//   - Source: the attester (FromDID);
//   - Dimension: PeerAttestation, a custom dimension of its own, so that
//     keys anyone can make do not move reliability, which the trust gate
//     reads; trusted attesters lift the starter floor instead (TrustGate);
//   - Score: 0.5 + 0.5×weight for a positive outcome, 0.5 for a neutral
//     one, 0.5 − 0.5×weight for a negative one (weight 0 says nothing);
//   - Timestamp: when it was recorded (an attestation signs no time);
//   - Evidence: "avp-attestation:" and the SHA-256 of the signature, which
//     names the attestation: the same attestation is recorded once;
//   - Message: outcome, weight, context and evidence hash.

// PeerAttestation is the dimension AVP attestations are recorded in.
const PeerAttestation = "peer-attestation"

// The outcomes of an attestation.
const (
	OutcomePositive = "positive"
	OutcomeNeutral  = "neutral"
	OutcomeNegative = "negative"
)

// Limits on attestations read from outside.
const (
	// MaxAttestationFile bounds a file of attestations.
	MaxAttestationFile = 4 << 20
	// MaxAttestations bounds the attestations of one file.
	MaxAttestations = 4096
	// MaxAttestationContext bounds an attestation's context.
	MaxAttestationContext = 256
)

// evidencePrefix starts the Evidence of an attestation's signal.
const evidencePrefix = "avp-attestation:"

// Attestation is an AVP peer attestation, in the JSON form this package
// reads and writes (snake_case, as AVP's API names its fields).
type Attestation struct {
	FromDID      string  `json:"from_did"`
	ToDID        string  `json:"to_did"`
	Outcome      string  `json:"outcome"`
	Weight       float64 `json:"weight"`
	Context      string  `json:"context,omitempty"`
	EvidenceHash string  `json:"evidence_hash,omitempty"`
	// Signature is the hex Ed25519 signature of SigningInput by the key
	// of FromDID, a did:key.
	Signature string `json:"signature"`
}

// SigningInput returns the bytes AVP signs: Python's
// json.dumps({"context", "evidence_hash", "outcome", "to", "weight"},
// sort_keys=True, separators=(",", ":")), with a missing context or
// evidence hash as "", strings escaped as Python escapes them (non-ASCII as
// \uXXXX) and the weight written as Python writes a float.
func (a *Attestation) SigningInput() []byte {
	var b bytes.Buffer
	b.WriteString(`{"context":`)
	pyString(&b, a.Context)
	b.WriteString(`,"evidence_hash":`)
	pyString(&b, a.EvidenceHash)
	b.WriteString(`,"outcome":`)
	pyString(&b, a.Outcome)
	b.WriteString(`,"to":`)
	pyString(&b, a.ToDID)
	b.WriteString(`,"weight":`)
	b.WriteString(pyFloat(a.Weight))
	b.WriteByte('}')
	return b.Bytes()
}

// pyString writes s as Python's json.dumps does with ensure_ascii.
func pyString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r >= 0x20 && r < 0x7f {
				b.WriteRune(r)
				continue
			}
			u := func(x rune) {
				b.WriteString(`\u`)
				for shift := 12; shift >= 0; shift -= 4 {
					b.WriteByte(hexDigits[(x>>shift)&0xf])
				}
			}
			if r > 0xffff {
				r -= 0x10000
				u(0xd800 + (r>>10)&0x3ff)
				u(0xdc00 + r&0x3ff)
			} else {
				u(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloat writes x as Python's repr of a float: the shortest digits that
// read back, in positional form for exponents from -4 to 15 (with ".0"
// when there is no fraction) and as d.ddde±XX otherwise.
func pyFloat(x float64) string {
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	_, exp, _ := strings.Cut(e, "e")
	n, _ := strconv.Atoi(exp)
	if n < -4 || n >= 16 {
		return e
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// Check validates an attestation's fields (not its signature).
func (a *Attestation) Check() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if _, err := identity.PublicKeyFromDID(a.FromDID); err != nil {
		add("from_did %q is not an Ed25519 did:key: %v", clip(a.FromDID), err)
	}
	if !ValidDID(a.ToDID) {
		add("to_did %q is not a DID", clip(a.ToDID))
	}
	if SameAgent(a.FromDID, a.ToDID) {
		add("from_did and to_did are the same agent: an agent does not attest itself")
	}
	switch a.Outcome {
	case OutcomePositive, OutcomeNeutral, OutcomeNegative:
	default:
		add("outcome %q is not positive, neutral or negative", clip(a.Outcome))
	}
	if math.IsNaN(a.Weight) || a.Weight < 0 || a.Weight > 1 || math.Signbit(a.Weight) {
		add("weight %v is outside [0, 1]", a.Weight)
	}
	if err := checkText(a.Context, MaxAttestationContext, textLine); err != nil {
		add("context: %v", err)
	}
	if a.EvidenceHash != "" && !isLowerHexN(a.EvidenceHash, sha256.Size) {
		add("evidence_hash must be 64 lowercase hex digits (a SHA-256)")
	}
	if a.Outcome == OutcomeNegative && (a.Context == "" || a.EvidenceHash == "") {
		add("a negative attestation needs a context and an evidence_hash")
	}
	if !isLowerHexN(a.Signature, ed25519.SignatureSize) {
		add("signature must be 128 lowercase hex digits (an Ed25519 signature)")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: attestation: %s", ErrInvalid, strings.Join(problems, "; "))
}

// Verify checks the fields and the signature.
func (a *Attestation) Verify() error {
	if err := a.Check(); err != nil {
		return err
	}
	pub, _ := identity.PublicKeyFromDID(a.FromDID)
	sig, _ := hex.DecodeString(a.Signature)
	if !ed25519.Verify(pub, a.SigningInput(), sig) {
		return fmt.Errorf("%w: attestation from %s to %s: the signature does not verify with from_did's key", ErrInvalid, a.FromDID, a.ToDID)
	}
	return nil
}

// SignAttestation fills in FromDID and Signature with k, after checking
// the other fields.
func SignAttestation(a *Attestation, k *identity.Keypair) error {
	a.FromDID = k.DID()
	a.Signature = strings.Repeat("0", 2*ed25519.SignatureSize)
	if err := a.Check(); err != nil {
		a.Signature = ""
		return err
	}
	a.Signature = hex.EncodeToString(ed25519.Sign(k.PrivateKey(), a.SigningInput()))
	return nil
}

func isLowerHexN(s string, n int) bool { return len(s) == 2*n && isLowerHex(s) }

// attestationFields are the JSON fields of an attestation, spelled
// exactly.
var attestationFields = map[string]bool{
	"from_did": true, "to_did": true, "outcome": true, "weight": true,
	"context": true, "evidence_hash": true, "signature": true,
}

// ParseAttestations reads attestations from outside: one JSON object or an
// array of them, at most MaxAttestationFile bytes and MaxAttestations
// attestations, each field spelled exactly (no case variants), none twice,
// none unknown. Each is checked and its signature verified; the error
// names the first that fails by its position.
func ParseAttestations(data []byte) ([]Attestation, error) {
	if len(data) > MaxAttestationFile {
		return nil, fmt.Errorf("%w: the attestations file is larger than %d bytes", ErrInvalid, MaxAttestationFile)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: the attestations file is not valid UTF-8", ErrInvalid)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%w: the attestations file is empty", ErrInvalid)
	}
	var raws []json.RawMessage
	if trimmed[0] == '[' {
		if err := strictUnmarshal(trimmed, &raws); err != nil {
			return nil, fmt.Errorf("%w: attestations: %v", ErrInvalid, err)
		}
		if len(raws) == 0 {
			return nil, fmt.Errorf("%w: the attestations file holds an empty list", ErrInvalid)
		}
	} else {
		raws = []json.RawMessage{trimmed}
	}
	if len(raws) > MaxAttestations {
		return nil, fmt.Errorf("%w: the attestations file holds %d attestations, more than %d", ErrInvalid, len(raws), MaxAttestations)
	}
	out := make([]Attestation, len(raws))
	for i, raw := range raws {
		where := fmt.Sprintf("attestation %d", i+1)
		if err := checkObjectKeys(raw); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
		}
		var a Attestation
		if err := strictUnmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
		}
		if err := a.Verify(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out[i] = a
	}
	return out, nil
}

// strictUnmarshal decodes one JSON value with no unknown fields and
// nothing after it.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}

// checkObjectKeys requires data to be a JSON object whose keys are
// attestation fields, spelled exactly, each at most once (encoding/json
// alone matches keys case-insensitively and keeps the last of two).
func checkObjectKeys(data []byte) error {
	return checkJSONKeys(data, attestationFields, "from_did", "to_did", "outcome", "weight", "signature")
}

// checkJSONKeys requires data to be a JSON object whose keys are among
// fields, spelled exactly, each at most once and not null, with the
// required ones present.
func checkJSONKeys(data []byte, fields map[string]bool, required ...string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := tok.(string)
		if !fields[k] {
			return fmt.Errorf("unknown field %q", clip(k))
		}
		if seen[k] {
			return fmt.Errorf("field %q appears twice", k)
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if bytes.Equal(v, []byte("null")) {
			return fmt.Errorf("field %q is null", k)
		}
	}
	for _, k := range required {
		if !seen[k] {
			return fmt.Errorf("field %q is required", k)
		}
	}
	return nil
}

// Signal returns the signal an attestation becomes, observed at at.
func (a *Attestation) Signal(at time.Time) Signal {
	score := 0.5
	switch a.Outcome {
	case OutcomePositive:
		score = 0.5 + 0.5*a.Weight
	case OutcomeNegative:
		score = 0.5 - 0.5*a.Weight
	}
	sig, _ := hex.DecodeString(a.Signature)
	id := sha256.Sum256(sig)
	msg := fmt.Sprintf("AVP attestation: %s, weight %s", a.Outcome, pyFloat(a.Weight))
	if a.Context != "" {
		msg += ", context " + a.Context
	}
	if a.EvidenceHash != "" {
		msg += ", evidence sha256:" + a.EvidenceHash
	}
	return Signal{Source: a.FromDID, Dimension: PeerAttestation, Score: score, Timestamp: truncate(at),
		Evidence: evidencePrefix + hex.EncodeToString(id[:]), Message: msg}
}

// AttestationResult says what RecordAttestations did with one attestation.
type AttestationResult struct {
	Attestation Attestation `json:"attestation"`
	Profile     string      `json:"profile"`
	Signal      Signal      `json:"signal"`
	// Duplicate is true when the profile already held the attestation;
	// nothing was recorded for it.
	Duplicate bool `json:"duplicate"`
}

// RecordAttestations verifies attestations and records each as a signal
// of its attested agent (see PeerAttestation), observed at at. An
// attestation the profile already holds is skipped. Nothing is recorded
// unless every attestation verifies.
func (w *Workspace) RecordAttestations(atts []Attestation, at time.Time) ([]AttestationResult, error) {
	if len(atts) > MaxAttestations {
		return nil, fmt.Errorf("%w: at most %d attestations at a time", ErrInvalid, MaxAttestations)
	}
	for i := range atts {
		if err := atts[i].Verify(); err != nil {
			return nil, fmt.Errorf("attestation %d: %w", i+1, err)
		}
	}
	unlock, err := w.lock(ProfilesDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]AttestationResult, 0, len(atts))
	for _, a := range atts {
		ref, err := parseAgent(a.ToDID)
		if err != nil {
			return out, err
		}
		s := a.Signal(at)
		if s.Source, err = sourceDID(s.Source); err != nil {
			return out, err
		}
		if err := s.check(); err != nil {
			return out, fmt.Errorf("attestation from %s to %s: %w", a.FromDID, a.ToDID, err)
		}
		dup := false
		p, err := w.appendLocked(ref, "", []Signal{s}, func(p *Profile, s Signal) bool {
			for i := len(p.Signals) - 1; i >= 0; i-- {
				if p.Signals[i].Evidence == s.Evidence && p.Signals[i].Source == s.Source {
					dup = true
					return true
				}
			}
			return false
		})
		if err != nil {
			return out, fmt.Errorf("attestation from %s to %s: %w", a.FromDID, a.ToDID, err)
		}
		out = append(out, AttestationResult{Attestation: a, Profile: rel(ProfilesDir, p.Slug), Signal: s, Duplicate: dup})
	}
	return out, nil
}

// positiveAttesters returns the distinct sources of the profile's
// peer-attestation signals above 0.5 (positive outcomes of some weight).
func positiveAttesters(p *Profile) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range p.Signals {
		if s.Dimension == PeerAttestation && s.Score > 0.5 && !seen[s.Source] {
			seen[s.Source] = true
			out = append(out, s.Source)
		}
	}
	return out
}
