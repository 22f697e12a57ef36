package ldp

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/docstore"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// TaskAttestationVersion is the version of the task attestation profile.
const TaskAttestationVersion = "ldp-task-attestation/0.1"

// TaskAttestationPrefix starts every task attestation ID; 24 lower-case
// hex digits follow.
const TaskAttestationPrefix = "ldpatt_"

// MaxTaskAttestationSize bounds an encoded task attestation.
const MaxTaskAttestationSize = 64 << 10

// HashPrefix starts every hash a task attestation holds: the lower-case
// hex SHA-256 of a JSON value's RFC 8785 (JCS) form follows.
const HashPrefix = "sha256:"

// TaskAttestation is a delegate's signed record of one task it completed
// (the DelegateOS task attestation profile, docs/ldp.md): what was asked
// (the TASK_SUBMIT, its skill and input), by whom, in which session and
// under which delegation, what the result was (its output's hash,
// verification), what the gate charged and the receipts it wrote. The
// delegate signs it with the key of its card's did:key, Ed25519 over the
// JCS form of every member but signature, as envelopes are signed.
type TaskAttestation struct {
	ID        string `json:"id"`
	Version   string `json:"version"`
	Delegate  string `json:"delegate"`
	Signer    string `json:"signer"`
	Initiator string `json:"initiator"`
	// InitiatorSigner is the did:key that signed the TASK_SUBMIT (Ed25519
	// profile); empty for an HMAC envelope.
	InitiatorSigner string `json:"initiator_signer,omitempty"`
	SessionID       string `json:"session_id"`
	TaskID          string `json:"task_id"`
	Skill           string `json:"skill"`
	// Request is the hash of the TASK_SUBMIT envelope as received (every
	// member, its signature included): EnvelopeHash.
	Request string `json:"request"`
	// InputHash is ValueHash of the task's input.
	InputHash  string `json:"input_hash"`
	ContractID string `json:"contract_id,omitempty"`
	// DelegationID is the delegation the task ran under: the last block
	// of its token.
	DelegationID       string `json:"delegation_id,omitempty"`
	OutputHash         string `json:"output_hash"`
	Verified           bool   `json:"verified"`
	VerificationStatus string `json:"verification_status"`
	// CostChargedMicrocents is what the gate charged; absent when the
	// delegate does not know (the upstream reports its own cost).
	CostChargedMicrocents *int64   `json:"cost_charged_microcents,omitempty"`
	ReceiptHashes         []string `json:"receipt_hashes,omitempty"`
	CreatedAt             string   `json:"created_at"`
	Signature             string   `json:"signature,omitempty"`
}

// NewTaskAttestationID returns a new random task attestation ID.
func NewTaskAttestationID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return TaskAttestationPrefix + hex.EncodeToString(b[:])
}

// ValidTaskAttestationID reports whether id is TaskAttestationPrefix and
// 24 lower-case hex digits.
func ValidTaskAttestationID(id string) bool {
	h, ok := strings.CutPrefix(id, TaskAttestationPrefix)
	return ok && len(h) == 24 && strings.Trim(h, "0123456789abcdef") == ""
}

// ValueHash is HashPrefix and the hex SHA-256 of the JCS form of the JSON
// value raw. A number whose JCS form is another number (an integer beyond
// 2^53) is refused: the hash could not say which one was meant.
func ValueHash(raw json.RawMessage) (string, error) {
	is, err := firstNumberIssue(raw, true)
	if err != nil {
		return "", err
	}
	if is != nil {
		return "", lossyNumberError(is)
	}
	c, err := canon.Marshal(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return HashPrefix + hex.EncodeToString(sum[:]), nil
}

// EnvelopeHash is the hash of an envelope as it travelled: ValueHash of
// the envelope as received (for one parsed) or as sent (MarshalJSON, for
// one built and signed here), signature included.
func EnvelopeHash(e *Envelope) (string, error) {
	data := e.raw
	if data == nil {
		var err error
		if data, err = e.MarshalJSON(); err != nil {
			return "", err
		}
	}
	return ValueHash(data)
}

func validHash(h string) bool {
	x, ok := strings.CutPrefix(h, HashPrefix)
	return ok && len(x) == 64 && strings.Trim(x, "0123456789abcdef") == ""
}

// signedInput is the JCS form of a without its signature
// (canon.Marshal's, written directly: TestTaskAttestationSignedInput and
// FuzzTaskAttestationSignedInput hold the two equal).
func (a *TaskAttestation) signedInput() ([]byte, error) {
	if c := a.CostChargedMicrocents; c != nil && (*c < 0 || *c > canon.MaxSafeInteger) {
		// Refused by check; JCS would write it as a double.
		return a.signedInputMarshal()
	}
	type member struct {
		name  string
		value []byte
	}
	ms := make([]member, 0, 19)
	str := func(name, v string, omitEmpty bool) {
		if v != "" || !omitEmpty {
			ms = append(ms, member{name, canon.AppendString(nil, v)})
		}
	}
	str("id", a.ID, false)
	str("version", a.Version, false)
	str("delegate", a.Delegate, false)
	str("signer", a.Signer, false)
	str("initiator", a.Initiator, false)
	str("initiator_signer", a.InitiatorSigner, true)
	str("session_id", a.SessionID, false)
	str("task_id", a.TaskID, false)
	str("skill", a.Skill, false)
	str("request", a.Request, false)
	str("input_hash", a.InputHash, false)
	str("contract_id", a.ContractID, true)
	str("delegation_id", a.DelegationID, true)
	str("output_hash", a.OutputHash, false)
	ms = append(ms, member{"verified", strconv.AppendBool(nil, a.Verified)})
	str("verification_status", a.VerificationStatus, false)
	if c := a.CostChargedMicrocents; c != nil {
		ms = append(ms, member{"cost_charged_microcents", canon.AppendInt(nil, *c)})
	}
	if len(a.ReceiptHashes) > 0 {
		v := []byte{'['}
		for i, h := range a.ReceiptHashes {
			if i > 0 {
				v = append(v, ',')
			}
			v = canon.AppendString(v, h)
		}
		ms = append(ms, member{"receipt_hashes", append(v, ']')})
	}
	str("created_at", a.CreatedAt, false)
	// JCS orders members by their names' UTF-16 code units: these are
	// ASCII, so by bytes.
	slices.SortFunc(ms, func(x, y member) int { return strings.Compare(x.name, y.name) })
	out := make([]byte, 0, 1024)
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = canon.AppendString(out, m.name)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

// signedInputMarshal is signedInput through encoding/json and JCS.
func (a *TaskAttestation) signedInputMarshal() ([]byte, error) {
	c := *a
	c.Signature = ""
	return canon.Marshal(&c)
}

// Sign sets a's signer to key's did:key and signs it.
func (a *TaskAttestation) Sign(key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("ldp: signing key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	a.Signer = identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey))
	if err := a.check(); err != nil {
		return err
	}
	msg, err := a.signedInput()
	if err != nil {
		return err
	}
	a.Signature = b64.Encode(ed25519.Sign(key, msg))
	return nil
}

// check refuses an attestation whose members are not of the profile.
func (a *TaskAttestation) check() error {
	if !ValidTaskAttestationID(a.ID) {
		return fmt.Errorf("id %q is not %q and 24 lower-case hex digits", clip(a.ID), TaskAttestationPrefix)
	}
	if a.Version != TaskAttestationVersion {
		return fmt.Errorf("version %q, want %q", clip(a.Version), TaskAttestationVersion)
	}
	for _, f := range []struct {
		name, v  string
		required bool
	}{{"delegate", a.Delegate, true}, {"initiator", a.Initiator, true}, {"session_id", a.SessionID, true},
		{"task_id", a.TaskID, true}, {"skill", a.Skill, true}, {"contract_id", a.ContractID, false},
		{"delegation_id", a.DelegationID, false}} {
		if err := checkID(f.name, f.v, f.required); err != nil {
			return err
		}
	}
	if _, err := identity.PublicKeyFromDID(a.Signer); err != nil {
		return fmt.Errorf("signer: %v", err)
	}
	if a.InitiatorSigner != "" {
		if _, err := identity.PublicKeyFromDID(a.InitiatorSigner); err != nil {
			return fmt.Errorf("initiator_signer: %v", err)
		}
	}
	for name, h := range map[string]string{"request": a.Request, "input_hash": a.InputHash, "output_hash": a.OutputHash} {
		if !validHash(h) {
			return fmt.Errorf("%s %q is not %q and 64 lower-case hex digits", name, clip(h), HashPrefix)
		}
	}
	if !slices.Contains(verificationStatuses, a.VerificationStatus) {
		return fmt.Errorf("verification_status %q is not one of %v", clip(a.VerificationStatus), verificationStatuses)
	}
	if c := a.CostChargedMicrocents; c != nil && (*c < 0 || *c > canon.MaxSafeInteger) {
		return fmt.Errorf("cost_charged_microcents %d is outside 0..2^53-1", *c)
	}
	if err := (&ProvenanceDOS{ReceiptHashes: a.ReceiptHashes}).check("receipt_hashes"); err != nil {
		return err
	}
	if _, err := timestamp.Parse(a.CreatedAt); err != nil || len(a.CreatedAt) > 40 {
		return fmt.Errorf("created_at %q is not a timestamp", clip(a.CreatedAt))
	}
	return nil
}

// ErrTaskAttestation is wrapped by every refusal of a task attestation.
var ErrTaskAttestation = errors.New("task attestation refused")

func attestationError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTaskAttestation, fmt.Sprintf(format, args...))
}

// ParseTaskAttestation reads a task attestation strictly (no unknown or
// repeated member) and checks its signature by its signer.
func ParseTaskAttestation(data []byte) (*TaskAttestation, error) {
	if len(data) > MaxTaskAttestationSize {
		return nil, attestationError("%d bytes, at most %d", len(data), MaxTaskAttestationSize)
	}
	var a TaskAttestation
	if err := strictjson.Unmarshal(data, &a); err != nil {
		return nil, attestationError("%v", err)
	}
	if err := a.Verify(); err != nil {
		return nil, err
	}
	return &a, nil
}

// Verify checks a's members and its signature by its signer.
func (a *TaskAttestation) Verify() error {
	if err := a.check(); err != nil {
		return attestationError("%v", err)
	}
	pub, _ := identity.PublicKeyFromDID(a.Signer)
	sig, err := b64.Decode(a.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return attestationError("signature is not %d bytes of unpadded base64url", ed25519.SignatureSize)
	}
	msg, err := a.signedInput()
	if err != nil {
		return attestationError("%v", err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return attestationError("the signature by %s does not verify", clip(a.Signer))
	}
	return nil
}

// VerifyResult checks a TASK_RESULT's attestation against the exchange the
// initiator saw: sent is the TASK_SUBMIT as sent, reply the TASK_RESULT as
// received (its envelope signature already checked). The attestation's
// signer must be the reply's Ed25519 signer. A result whose provenance names no attestation passes
// (delegates without a key issue none); one that names an ID must carry
// the attestation, signed by the key that signed the reply, and every
// member must be what the exchange shows.
func VerifyResult(sent, reply *Envelope) (*TaskAttestation, error) {
	res, ok := reply.Body.(*TaskResult)
	if !ok {
		return nil, nil
	}
	d := res.Provenance.DelegateOS
	if d == nil || (d.AttestationID == "" && d.Attestation == nil) {
		return nil, nil
	}
	if d.Attestation == nil {
		return nil, attestationError("provenance names attestation %s but does not carry it", clip(d.AttestationID))
	}
	a, err := d.attestation()
	if err != nil {
		return nil, err
	}
	sub, ok := sent.Body.(*TaskSubmit)
	if !ok {
		return nil, attestationError("the request is not a TASK_SUBMIT")
	}
	req, err := EnvelopeHash(sent)
	if err != nil {
		return nil, attestationError("hashing the TASK_SUBMIT: %v", err)
	}
	in, err := ValueHash(sub.Input)
	if err != nil {
		return nil, attestationError("hashing the input: %v", err)
	}
	out, err := ValueHash(res.Output)
	if err != nil {
		return nil, attestationError("hashing the output: %v", err)
	}
	want := []struct{ name, got, want string }{
		{"id", a.ID, d.AttestationID},
		{"signer", a.Signer, reply.Signer},
		{"delegate", a.Delegate, reply.From},
		{"initiator", a.Initiator, sent.From},
		{"session_id", a.SessionID, sent.SessionID},
		{"task_id", a.TaskID, sub.TaskID},
		{"skill", a.Skill, sub.Skill},
		{"request", a.Request, req},
		{"input_hash", a.InputHash, in},
		{"output_hash", a.OutputHash, out},
		{"verification_status", a.VerificationStatus, res.Provenance.VerificationStatus},
	}
	if reply.SignatureAlgorithm != AlgEd25519 {
		// An HMAC reply names no key: the attestation's signer is to be
		// held to the card's did:key by the caller.
		want[1].want = a.Signer
	}
	if sent.SignatureAlgorithm == AlgEd25519 {
		want = append(want, struct{ name, got, want string }{"initiator_signer", a.InitiatorSigner, sent.Signer})
	}
	for _, w := range want {
		if w.got != w.want {
			return nil, attestationError("its %s is %q, the exchange's %q", w.name, clip(w.got), clip(w.want))
		}
	}
	if a.Verified != res.Provenance.Verified {
		return nil, attestationError("it says verified %t, provenance %t", a.Verified, res.Provenance.Verified)
	}
	if !equalCost(a.CostChargedMicrocents, d.CostChargedMicrocents) {
		return nil, attestationError("its cost differs from provenance's")
	}
	if !slices.Equal(a.ReceiptHashes, d.ReceiptHashes) {
		return nil, attestationError("its receipt hashes differ from provenance's")
	}
	return a, nil
}

// verifiedAttestation is a task attestation that ParseTaskAttestation
// accepted, and the bytes it read. Parsing and verifying are a function of
// the bytes alone, so the same bytes need not be verified twice: the
// TASK_RESULT's provenance is checked when the envelope is parsed, its
// copy in the envelope's provenance, and again by VerifyResult.
type verifiedAttestation struct {
	raw []byte
	a   TaskAttestation
}

// attestation is ParseTaskAttestation(d.Attestation), done once for the
// same bytes: a changed Attestation is parsed and verified afresh. It
// returns a copy the caller may change.
func (d *ProvenanceDOS) attestation() (*TaskAttestation, error) {
	if v := d.verified; v == nil || !bytes.Equal(v.raw, d.Attestation) {
		a, err := ParseTaskAttestation(d.Attestation)
		if err != nil {
			return nil, err
		}
		d.verified = &verifiedAttestation{raw: bytes.Clone(d.Attestation), a: *a}
	}
	a := d.verified.a
	a.ReceiptHashes = slices.Clone(a.ReceiptHashes)
	return &a, nil
}

// shareVerified lets dst reuse src's verified attestation (when dst holds
// the same bytes: attestation compares them on each use).
func shareVerified(dst, src *ProvenanceDOS) {
	if dst != nil && src != nil && dst.verified == nil {
		dst.verified = src.verified
	}
}

func equalCost(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// TaskAttestationStore keeps task attestations by ID, never replacing one
// (docstore, as the workspace's other attestations are kept).
type TaskAttestationStore = docstore.Store[*TaskAttestation]

// TaskAttestationDir is a TaskAttestationStore with one file per
// attestation, <dir>/<id>.json.
type TaskAttestationDir = docstore.Dir[*TaskAttestation, taskAttestationKind]

// OpenTaskAttestationDir returns the store in directory path, creating it
// (mode 0700) if it is missing.
func OpenTaskAttestationDir(path string) (*TaskAttestationDir, error) {
	return docstore.OpenDir[*TaskAttestation, taskAttestationKind](path)
}

// TaskAttestationMemory is a TaskAttestationStore in memory.
type TaskAttestationMemory = docstore.Memory[*TaskAttestation, taskAttestationKind]

type taskAttestationKind struct{}

var (
	errAttestationConflict  = errors.New("a different task attestation has this ID")
	errAttestationMalformed = errors.New("task attestation malformed")
)

func (taskAttestationKind) Codec() *docstore.Codec[*TaskAttestation] {
	return &docstore.Codec[*TaskAttestation]{
		Kind:    "task attestation",
		ValidID: ValidTaskAttestationID,
		ID:      func(a *TaskAttestation) string { return a.ID },
		Encode: func(a *TaskAttestation) ([]byte, error) {
			if a == nil {
				return nil, errAttestationMalformed
			}
			if err := a.Verify(); err != nil {
				return nil, err
			}
			return canon.Marshal(a)
		},
		Decode: func(b []byte, id string) (*TaskAttestation, error) {
			a, err := ParseTaskAttestation(b)
			if err != nil {
				return nil, err
			}
			if a.ID != id {
				return nil, fmt.Errorf("%w: stored under %s but its id is %s", errAttestationMalformed, id, a.ID)
			}
			return a, nil
		},
		MaxSize:      MaxTaskAttestationSize,
		FileMode:     0o600,
		DirMode:      0o700,
		ErrConflict:  errAttestationConflict,
		ErrMalformed: errAttestationMalformed,
	}
}
