package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/delegateos/delegateos/identity"
)

// MaxCheckpointBytes bounds a checkpoint note read from outside (a
// bundle, a witness's answer): its three lines and up to 100 signatures.
const MaxCheckpointBytes = 16 << 10

// Origin is the origin line of the checkpoints of a log signed by did (a
// did:key), and the name of the note key that signs them.
func Origin(did string) string {
	return "audit.delegateos/" + strings.TrimPrefix(did, "did:key:")
}

// Checkpoint is a parsed C2SP tlog-checkpoint: the log's origin, its size
// and its Merkle tree root.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// body is the checkpoint's note text (signed).
func (c Checkpoint) body() string {
	return c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Root[:]) + "\n"
}

// parseCheckpointBody reads a checkpoint's note text strictly: exactly
// origin, size and root lines (no extension lines: this log writes none).
func parseCheckpointBody(text string) (Checkpoint, error) {
	var c Checkpoint
	lines := strings.SplitAfter(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return c, errors.New("a checkpoint's text is three lines: origin, size and root hash")
	}
	c.Origin = strings.TrimSuffix(lines[0], "\n")
	if c.Origin == "" {
		return c, errors.New("the checkpoint has no origin")
	}
	size := strings.TrimSuffix(lines[1], "\n")
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != size {
		return c, fmt.Errorf("the checkpoint's size %q is not a decimal number", size)
	}
	c.Size = n
	root := strings.TrimSuffix(lines[2], "\n")
	h, err := base64.StdEncoding.DecodeString(root)
	if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != root {
		return c, errors.New("the checkpoint's root is not a 32-byte hash in base64")
	}
	copy(c.Root[:], h)
	return c, nil
}

// noteSigner signs checkpoints as a note.Signer: Ed25519, the key named
// by the log's origin.
type noteSigner struct {
	name string
	hash uint32
	sign func([]byte) []byte
}

func (s *noteSigner) Name() string                    { return s.name }
func (s *noteSigner) KeyHash() uint32                 { return s.hash }
func (s *noteSigner) Sign(msg []byte) ([]byte, error) { return s.sign(msg), nil }

var _ note.Signer = &noteSigner{}

// keyHash is the note key ID: the first four bytes of SHA-256(name, "\n",
// the algorithm byte, the public key).
func keyHash(name string, alg byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', alg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

const algEd25519 = 0x01

// signCheckpoint returns the signed note of c.
func signCheckpoint(c Checkpoint, pub ed25519.PublicKey, sign func([]byte) []byte) ([]byte, error) {
	s := &noteSigner{name: c.Origin, hash: keyHash(c.Origin, algEd25519, pub), sign: sign}
	return note.Sign(&note.Note{Text: c.body()}, s)
}

// checkpointVerifier is the note verifier of the checkpoints of a log
// signed by did.
func checkpointVerifier(did string) (note.Verifier, error) {
	pub, err := identity.PublicKeyFromDID(did)
	if err != nil {
		return nil, err
	}
	vkey, err := note.NewEd25519VerifierKey(Origin(did), pub)
	if err != nil {
		return nil, err
	}
	return note.NewVerifier(vkey)
}

// OpenCheckpoint checks a signed checkpoint note: signed by did's key as
// its log's origin, of the form C2SP tlog-checkpoint defines. Other
// signatures on it (a witness's cosignature) are kept in the note,
// unverified.
func OpenCheckpoint(msg []byte, did string) (Checkpoint, *note.Note, error) {
	if len(msg) > MaxCheckpointBytes {
		return Checkpoint{}, nil, fmt.Errorf("the checkpoint is longer than %d bytes", MaxCheckpointBytes)
	}
	v, err := checkpointVerifier(did)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			return Checkpoint{}, nil, fmt.Errorf("the checkpoint is not signed by %s", did)
		}
		return Checkpoint{}, nil, fmt.Errorf("the checkpoint's signature: %v", err)
	}
	c, err := parseCheckpointBody(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != Origin(did) {
		return Checkpoint{}, nil, fmt.Errorf("the checkpoint's origin is %q, not %q", c.Origin, Origin(did))
	}
	return c, n, nil
}
