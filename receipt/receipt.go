// Package receipt builds, signs, parses and verifies the proxy's signed
// evidence: decision, execution and human approval receipts in the shapes
// of AVP's decision_receipt/2, execution_receipt/2 and
// human_approval_receipt/2, and the audit log's checkpoints,
// audit_checkpoint/2 (docs/receipts.md).
//
// A receipt is the RFC 8785 canonical JSON of its body with a "proof"
// member: a DataIntegrityProof (cryptosuite eddsa-jcs-2022, AVP's /2
// construction) whose proofValue is the Ed25519 signature, in multibase
// base58btc, over the canonical JSON of the body without "proof". A
// receipt's digest is the SHA-256 of its canonical bytes, proof included;
// receipts refer to one another, and audit log entries to the entry before
// them, by that digest in lower-case hex.
package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/delegateos/delegateos/identity"
)

// The schema_version of each kind.
const (
	KindDecision      = "decision_receipt/2"
	KindExecution     = "execution_receipt/2"
	KindHumanApproval = "human_approval_receipt/2"
	// KindCheckpoint is the checkpoint written today: it carries a signed
	// C2SP checkpoint of the log's Merkle tree ("checkpoint").
	KindCheckpoint = "audit_checkpoint/3"
	// KindCheckpointV2 and KindCheckpointV1 are the checkpoints of logs
	// written before checkpoints carried a tree (/2), or "recovered" (/1):
	// read, never written.
	KindCheckpointV2 = "audit_checkpoint/2"
	KindCheckpointV1 = "audit_checkpoint/1"
)

// Kinds lists every schema_version Parse accepts.
var Kinds = []string{KindDecision, KindExecution, KindHumanApproval, KindCheckpoint, KindCheckpointV2, KindCheckpointV1}

// Proof members fixed by the /2 construction.
const (
	ProofType   = "DataIntegrityProof"
	Cryptosuite = "eddsa-jcs-2022"
)

// MaxBytes bounds one receipt's canonical JSON. Arguments and results
// included in clear count towards it; a receipt that would be larger is
// written with their hashes only.
const MaxBytes = 1 << 20

// Proof is a receipt's DataIntegrityProof.
type Proof struct {
	Type               string `json:"type"`
	Cryptosuite        string `json:"cryptosuite"`
	VerificationMethod string `json:"verificationMethod"`
	ProofValue         string `json:"proofValue"`
}

// Position is where a receipt sits in an audit log: its entry number
// (the first entry is 1) and the digest of the entry before it (64 zeros
// for the first). Both are signed with the receipt, so an entry cannot be
// moved without its signature failing.
type Position struct {
	Seq  int64  `json:"audit_seq,omitempty"`
	Prev string `json:"audit_prev,omitempty"`
}

// GenesisPrev is the audit_prev of a log's first entry.
var GenesisPrev = strings.Repeat("0", 64)

// Body is a receipt's body: one of *DecisionBody, *ExecutionBody,
// *HumanApprovalBody and *CheckpointBody.
type Body interface {
	kind() string
	position() *Position
	proof() **Proof
}

// Signer signs receipts with the proxy's key.
type Signer struct {
	priv ed25519.PrivateKey
	did  string
	vm   string
}

// NewSigner returns a signer for k.
func NewSigner(k *identity.Keypair) *Signer {
	did := k.DID()
	return &Signer{priv: k.PrivateKey(), did: did, vm: did + "#" + strings.TrimPrefix(did, "did:key:")}
}

// DID is the signer's did:key.
func (s *Signer) DID() string { return s.did }

// Sign returns the receipt of b: its canonical JSON with the proof. b's
// proof member is set.
func (s *Signer) Sign(b Body) ([]byte, error) {
	p := b.proof()
	*p = nil
	unsigned, at, err := encodeAt(b)
	if err != nil {
		return nil, fmt.Errorf("canonicalize the %s: %w", b.kind(), err)
	}
	sig := ed25519.Sign(s.priv, unsigned)
	*p = &Proof{Type: ProofType, Cryptosuite: Cryptosuite, VerificationMethod: s.vm, ProofValue: "z" + identity.Base58Encode(sig)}
	out := withProof(unsigned, at, *p)
	if len(out) > MaxBytes {
		return nil, fmt.Errorf("the %s is %d bytes, more than %d", b.kind(), len(out), MaxBytes)
	}
	return out, nil
}

// Encode returns the receipt of b without a proof: an audit log entry
// that its log's next checkpoint signs (docs/receipts.md). b's proof
// member is cleared.
func (s *Signer) Encode(b Body) ([]byte, error) {
	*b.proof() = nil
	out, err := encode(b)
	if err != nil {
		return nil, fmt.Errorf("canonicalize the %s: %w", b.kind(), err)
	}
	if len(out) > MaxBytes {
		return nil, fmt.Errorf("the %s is %d bytes, more than %d", b.kind(), len(out), MaxBytes)
	}
	return out, nil
}

// SignBytes is the signer's Ed25519 signature of msg (the audit log signs
// its checkpoints' notes with it).
func (s *Signer) SignBytes(msg []byte) []byte { return ed25519.Sign(s.priv, msg) }

// PublicKey is the signer's Ed25519 public key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// Digest is the lower-case hex SHA-256 of a receipt's bytes.
func Digest(receipt []byte) string {
	d := sha256.Sum256(receipt)
	return hex.EncodeToString(d[:])
}

// Receipt is a parsed receipt.
type Receipt struct {
	// Kind is the schema_version.
	Kind string
	// Body is the decoded body: *DecisionBody, *ExecutionBody,
	// *HumanApprovalBody or *CheckpointBody.
	Body Body
	// Signer is the did:key of the proof's verification method.
	Signer string
	// Digest is the SHA-256 of the receipt's bytes, in hex.
	Digest string

	raw []byte
	sig []byte
	pub ed25519.PublicKey
}

// Position is where the receipt says it sits in an audit log; zero when
// it was signed outside one.
func (r *Receipt) Position() Position { return *r.Body.position() }

// Raw is the receipt's bytes as parsed.
func (r *Receipt) Raw() []byte { return r.raw }

// ParseError says what is wrong with a receipt's bytes.
type ParseError struct{ Msg string }

func (e *ParseError) Error() string { return e.Msg }

func parseErrorf(format string, args ...any) error {
	return &ParseError{Msg: fmt.Sprintf(format, args...)}
}

// ErrBadSignature is returned by Verify for a signature that does not
// verify under the receipt's verification method.
var ErrBadSignature = errors.New("the proof's signature does not verify")

// ErrUnsigned is returned by Verify for an audit log entry without a
// proof (ParseEntry reads one): the log's checkpoints sign it.
var ErrUnsigned = errors.New("the receipt has no proof of its own (it is signed by its audit log's checkpoint)")

// Parse reads a receipt strictly: at most MaxBytes of canonical JSON (RFC
// 8785: no whitespace, sorted members, no duplicates, no escapes JCS does
// not write), of a known kind, with exactly the members its kind defines,
// the required ones present and well formed, and a proof of the /2
// construction whose verification method is an Ed25519 did:key. It does
// not check the signature: Verify does.
func Parse(data []byte) (*Receipt, error) { return parse(data, false, nil) }

// ParseEntry is Parse for an audit log's entry, which may have no proof
// when it is not a checkpoint and has its audit_seq: the log's next
// checkpoint signs it. Its Signer is then "" and Verify fails
// (ErrUnsigned).
func ParseEntry(data []byte) (*Receipt, error) { return parse(data, true, nil) }

// ParseEntryHashed is ParseEntry of data whose SHA-256 the caller has
// computed already (audit verify hashes each line once, for its leaf).
func ParseEntryHashed(data []byte, sum *[32]byte) (*Receipt, error) { return parse(data, true, sum) }

// Signed reports whether the receipt carries a proof of its own.
func (r *Receipt) Signed() bool { return r.sig != nil }

func parse(data []byte, unsigned bool, sum *[32]byte) (*Receipt, error) {
	if len(data) > MaxBytes {
		return nil, parseErrorf("receipt is %d bytes, more than %d", len(data), MaxBytes)
	}
	var head struct {
		SchemaVersion *string `json:"schema_version"`
	}
	if kind, ok := knownKind(data); ok {
		// The strict decoding below checks the whole receipt anyway.
		head.SchemaVersion = &kind
	} else if err := json.Unmarshal(data, &head); err != nil {
		return nil, parseErrorf("receipt is not a JSON object: %v", clipErr(err))
	}
	if head.SchemaVersion == nil {
		return nil, parseErrorf("receipt has no schema_version")
	}
	var b Body
	switch *head.SchemaVersion {
	case KindDecision:
		b = new(DecisionBody)
	case KindExecution:
		b = new(ExecutionBody)
	case KindHumanApproval:
		b = new(HumanApprovalBody)
	case KindCheckpoint, KindCheckpointV2, KindCheckpointV1:
		b = new(CheckpointBody)
	default:
		return nil, parseErrorf("unknown schema_version %s; this verifier reads %s", quote(*head.SchemaVersion), strings.Join(Kinds, ", "))
	}
	if !fastDecode(data, b) {
		// What fastDecode does not take, encoding/json does, into a
		// fresh body, saying what is wrong.
		b = reflect.New(reflect.TypeOf(b).Elem()).Interface().(Body)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(b); err != nil {
			return nil, parseErrorf("%s: %v", *head.SchemaVersion, clipErr(err))
		}
		if dec.More() {
			return nil, parseErrorf("%s: data after the receipt", *head.SchemaVersion)
		}
	}
	// Re-encoding what was read must give the same bytes: this refuses
	// members that differ only in letter case (which encoding/json would
	// fold), duplicates, empty optional members, non-canonical numbers,
	// strings and order, and whitespace.
	if !canonical(b, data) {
		return nil, parseErrorf("%s: not the canonical JSON (RFC 8785) of a %s: a member is unknown, repeated, re-cased, empty or out of order, or the text is not canonical", *head.SchemaVersion, *head.SchemaVersion)
	}
	if err := checkBody(b); err != nil {
		return nil, parseErrorf("%s: %v", *head.SchemaVersion, err)
	}
	var digest string
	if sum != nil {
		digest = hex.EncodeToString(sum[:])
	} else {
		digest = Digest(data)
	}
	r := &Receipt{Kind: *head.SchemaVersion, Body: b, raw: data, Digest: digest}
	p := *b.proof()
	if p == nil {
		if _, ckpt := b.(*CheckpointBody); unsigned && !ckpt && b.position().Seq > 0 {
			return r, nil
		}
		return nil, parseErrorf("%s: no proof", r.Kind)
	}
	if p.Type != ProofType || p.Cryptosuite != Cryptosuite {
		return nil, parseErrorf("%s: proof must be a %s with cryptosuite %s", r.Kind, ProofType, Cryptosuite)
	}
	did, frag, ok := strings.Cut(p.VerificationMethod, "#")
	if !ok || "did:key:"+frag != did {
		return nil, parseErrorf("%s: proof.verificationMethod must be did:key:X#X", r.Kind)
	}
	var err error
	if r.pub, err = identity.PublicKeyFromDID(did); err != nil {
		return nil, parseErrorf("%s: proof.verificationMethod: %v", r.Kind, err)
	}
	r.Signer = did
	enc, ok := strings.CutPrefix(p.ProofValue, "z")
	if !ok {
		return nil, parseErrorf("%s: proof.proofValue must be multibase base58btc (z...)", r.Kind)
	}
	if r.sig, err = identity.Base58Decode(enc); err != nil || len(r.sig) != ed25519.SignatureSize {
		return nil, parseErrorf("%s: proof.proofValue is not a %d-byte signature in base58btc", r.Kind, ed25519.SignatureSize)
	}
	return r, nil
}

// Verify checks the receipt's signature and, when trusted is not empty,
// that its signer is one of trusted (did:key values).
func (r *Receipt) Verify(trusted []string) error {
	if r.sig == nil {
		return ErrUnsigned
	}
	if len(trusted) > 0 {
		ok := false
		for _, t := range trusted {
			if t == r.Signer {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("signed by %s, which is not a trusted key (%s)", r.Signer, strings.Join(trusted, ", "))
		}
	}
	p := r.Body.proof()
	saved := *p
	*p = nil
	unsigned, err := encode(r.Body)
	*p = saved
	if err != nil {
		return err
	}
	if !ed25519.Verify(r.pub, unsigned, r.sig) {
		return ErrBadSignature
	}
	return nil
}

// knownKind finds the schema_version of canonical receipt JSON without
// parsing it all: the last "schema_version" member, the top level's in
// JCS order (no member after it holds an object), when it names a known
// kind. A wrong guess only makes the strict decoding fail.
func knownKind(data []byte) (string, bool) {
	const key = `"schema_version":"`
	i := bytes.LastIndex(data, []byte(key))
	if i < 0 {
		return "", false
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	for _, k := range Kinds {
		if string(rest[:j]) == k {
			return k, true
		}
	}
	return "", false
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func clipErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// PositionOf is b's position, for the audit log to set before signing.
func PositionOf(b Body) *Position { return b.position() }
