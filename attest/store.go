package attest

import (
	"fmt"

	"github.com/delegateos/delegateos/internal/docstore"
)

// Store holds attestations by ID; each is checked by Attestation.Verify
// (structure and signature) when it is stored and when it is read. An
// attestation, once stored, is never replaced by a different one.
// Implementations are safe for concurrent use.
type Store interface {
	// Put verifies a (Attestation.Verify) and stores it. Storing an
	// attestation already held is a no-op; a different attestation with the
	// same ID is an error wrapping ErrConflict.
	Put(a *Attestation) error
	// Get returns the attestation with the given ID, its signature
	// verified. A missing attestation is an error wrapping fs.ErrNotExist.
	Get(id string) (*Attestation, error)
	// List returns the IDs of the stored attestations in ascending order.
	List() ([]string, error)
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Dir)(nil)
)

// codec is how package docstore stores attestations.
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

// Memory is a Store in memory. The zero value is ready to use.
type Memory struct{ m docstore.Memory[*Attestation] }

// Put implements Store.
func (s *Memory) Put(a *Attestation) error { return s.m.Put(codec, a) }

// Get implements Store.
func (s *Memory) Get(id string) (*Attestation, error) { return s.m.Get(codec, id) }

// List implements Store.
func (s *Memory) List() ([]string, error) { return s.m.List(), nil }

// Dir is a Store with one file per attestation, <dir>/<id>.json, holding its
// canonical JSON and a newline (mode 600). Put writes a synced temporary
// file and renames it into place under an exclusive lock, so concurrent
// writers (goroutines or processes) never replace a stored attestation. Get reads
// the file again on every call and verifies it, and accepts any
// formatting: a file may be pretty-printed by hand.
type Dir struct{ d *docstore.Dir[*Attestation] }

// OpenDir returns the Store in directory path, creating it (mode 0700) if
// it is missing.
func OpenDir(path string) (*Dir, error) {
	d, err := docstore.OpenDir(codec, path)
	if err != nil {
		return nil, err
	}
	return &Dir{d}, nil
}

// Path returns the file that holds (or would hold) the attestation id.
func (d *Dir) Path(id string) (string, error) { return d.d.Path(codec, id) }

// Put implements Store.
func (d *Dir) Put(a *Attestation) error { return d.d.Put(codec, a) }

// Get implements Store.
func (d *Dir) Get(id string) (*Attestation, error) { return d.d.Get(codec, id) }

// List implements Store: the IDs of the files named like attestations. Files
// are not read; Get verifies each.
func (d *Dir) List() ([]string, error) { return d.d.List(codec) }

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
