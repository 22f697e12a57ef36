package attest

import (
	"fmt"

	"github.com/delegateos/delegateos/internal/docstore"
)

// Store holds attestations by ID; each is checked by Attestation.Verify
// (structure and signature) when it is stored and when it is read. An
// attestation, once stored, is never replaced by a different one: Put of
// an attestation already held is a no-op, and of a different one with
// the same ID an error wrapping ErrConflict. Get of a missing attestation
// is an error wrapping fs.ErrNotExist; List returns the IDs in ascending
// order. Implementations are safe for concurrent use.
type Store = docstore.Store[*Attestation]

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Dir)(nil)
)

// Memory is a Store in memory. The zero value is ready to use.
type Memory = docstore.Memory[*Attestation, kind]

// Dir is a Store with one file per attestation, <dir>/<id>.json, holding its
// canonical JSON and a newline (mode 600). Put writes a synced temporary
// file and renames it into place under an exclusive lock, so concurrent
// writers (goroutines or processes) never replace a stored attestation. Get reads
// the file again on every call and verifies it, and accepts any
// formatting: a file may be pretty-printed by hand. Path(id) is the file
// that holds (or would hold) the attestation id.
type Dir = docstore.Dir[*Attestation, kind]

// OpenDir returns the Store in directory path, creating it (mode 0700) if
// it is missing.
func OpenDir(path string) (*Dir, error) { return docstore.OpenDir[*Attestation, kind](path) }

// kind is how package docstore stores attestations.
type kind struct{}

func (kind) Codec() *docstore.Codec[*Attestation] { return codec }

var codec = &docstore.Codec[*Attestation]{
	Kind:         "attestation",
	ValidID:      ValidID,
	ID:           func(a *Attestation) string { return a.ID },
	Encode:       verifiedBytes,
	Decode:       parseVerified,
	MaxSize:      MaxAttestationSize,
	FileMode:     0o600, // an output may be private, so only the owner reads them
	DirMode:      0o700,
	ErrConflict:  ErrConflict,
	ErrMalformed: ErrMalformed,
}

// verifiedBytes verifies a and returns its canonical JSON.
func verifiedBytes(a *Attestation) ([]byte, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: nil attestation", ErrMalformed)
	}
	if err := a.Verify(); err != nil {
		return nil, err
	}
	return a.canonical()
}

// parseVerified parses and verifies stored bytes, which must hold the
// attestation with the given ID.
func parseVerified(b []byte, id string) (*Attestation, error) {
	a, pub, raw, err := parse(b)
	if err != nil {
		return nil, err
	}
	if err := a.checkSignature(pub, raw); err != nil {
		return nil, err
	}
	if a.ID != id {
		return nil, fmt.Errorf("%w: stored under %s but its id is %s", ErrMalformed, id, a.ID)
	}
	return a, nil
}
