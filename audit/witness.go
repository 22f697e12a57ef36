package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/delegateos/delegateos/identity"
)

// WitnessName is the note key name of the witness whose key is did: its
// cosignatures are signature lines of this name.
func WitnessName(did string) string {
	return "witness.delegateos/" + strings.TrimPrefix(did, "did:key:")
}

// algCosignature is the C2SP tlog-cosignature key ID algorithm byte of an
// Ed25519 cosignature/v1.
const algCosignature = 0x04

// cosignedMessage is what a cosignature/v1 signs: a header with its time
// (seconds since the epoch), then the checkpoint's text.
func cosignedMessage(text string, at uint64) []byte {
	return []byte("cosignature/v1\ntime " + strconv.FormatUint(at, 10) + "\n" + text)
}

// cosignatureVerifier verifies a witness's cosignatures (C2SP
// tlog-cosignature): the signature is the time (8 bytes, big-endian)
// then the Ed25519 signature of cosignedMessage.
type cosignatureVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func (v *cosignatureVerifier) Name() string    { return v.name }
func (v *cosignatureVerifier) KeyHash() uint32 { return v.hash }
func (v *cosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(v.pub, cosignedMessage(string(msg), binary.BigEndian.Uint64(sig[:8])), sig[8:])
}

var _ note.Verifier = &cosignatureVerifier{}

func witnessVerifier(did string) (*cosignatureVerifier, error) {
	pub, err := identity.PublicKeyFromDID(did)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %v", did, err)
	}
	name := WitnessName(did)
	return &cosignatureVerifier{name: name, hash: keyHash(name, algCosignature, pub), pub: pub}, nil
}

// Cosign returns the signature line of a cosignature, at time at
// (seconds since the epoch), of the checkpoint text by the witness key k.
func Cosign(text string, k *identity.Keypair, at uint64) string {
	name := WitnessName(k.DID())
	pub := k.PrivateKey().Public().(ed25519.PublicKey)
	sig := make([]byte, 4, 4+8+ed25519.SignatureSize)
	binary.BigEndian.PutUint32(sig, keyHash(name, algCosignature, pub))
	sig = binary.BigEndian.AppendUint64(sig, at)
	sig = append(sig, ed25519.Sign(k.PrivateKey(), cosignedMessage(text, at))...)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

// OpenWitnessed is OpenCheckpoint that also requires a valid cosignature
// by each of witnesses (did:key values), and returns the witnesses whose
// cosignatures verified.
func OpenWitnessed(msg []byte, did string, witnesses []string) (Checkpoint, []string, error) {
	if len(witnesses) == 0 {
		cp, _, err := OpenCheckpoint(msg, did)
		return cp, nil, err
	}
	if len(msg) > MaxCheckpointBytes {
		return Checkpoint{}, nil, fmt.Errorf("the checkpoint is longer than %d bytes", MaxCheckpointBytes)
	}
	logV, err := checkpointVerifier(did)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	vs := []note.Verifier{logV}
	for _, w := range witnesses {
		v, err := witnessVerifier(w)
		if err != nil {
			return Checkpoint{}, nil, err
		}
		vs = append(vs, v)
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			return Checkpoint{}, nil, fmt.Errorf("the checkpoint is not signed by %s", did)
		}
		return Checkpoint{}, nil, fmt.Errorf("the checkpoint's signatures: %v", err)
	}
	signed := map[string]bool{}
	for _, s := range n.Sigs {
		signed[s.Name] = true
	}
	if !signed[Origin(did)] {
		return Checkpoint{}, nil, fmt.Errorf("the checkpoint is not signed by %s", did)
	}
	var cosigners []string
	for _, w := range witnesses {
		if !signed[WitnessName(w)] {
			return Checkpoint{}, nil, fmt.Errorf("the checkpoint is not cosigned by the witness %s", w)
		}
		cosigners = append(cosigners, w)
	}
	c, err := parseCheckpointBody(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != Origin(did) {
		return Checkpoint{}, nil, fmt.Errorf("the checkpoint's origin is %q, not %q", c.Origin, Origin(did))
	}
	return c, cosigners, nil
}
