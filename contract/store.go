package contract

import (
	"fmt"

	"github.com/delegateos/delegateos/internal/docstore"
)

// Store holds verified contracts by ID. A contract, once stored, is never
// replaced by a different one: Put of a contract already held is a no-op,
// and of a different one with the same ID an error wrapping ErrConflict.
// Get returns the contract verified; a missing contract is an error
// wrapping fs.ErrNotExist. List returns the IDs in ascending order.
// Implementations are safe for concurrent use.
type Store = docstore.Store[*TaskContract]

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Dir)(nil)
)

// Memory is a Store in memory. The zero value is ready to use.
type Memory = docstore.Memory[*TaskContract, kind]

// Dir is a Store with one file per contract, <dir>/<id>.json, holding its
// canonical JSON and a newline (mode 644). Put writes a synced temporary
// file and renames it into place under an exclusive lock, so concurrent
// writers (goroutines or processes) never replace a stored contract. Get reads
// the file again on every call and verifies it, and accepts any
// formatting: a file may be pretty-printed by hand. Path(id) is the file
// that holds (or would hold) the contract id.
type Dir = docstore.Dir[*TaskContract, kind]

// OpenDir returns the Store in directory path, creating it (mode 0755) if
// it is missing.
func OpenDir(path string) (*Dir, error) { return docstore.OpenDir[*TaskContract, kind](path) }

// kind is how package docstore stores contracts.
type kind struct{}

func (kind) Codec() *docstore.Codec[*TaskContract] { return codec }

var codec = &docstore.Codec[*TaskContract]{
	Kind:         "contract",
	ValidID:      ValidID,
	ID:           func(c *TaskContract) string { return c.ID },
	Encode:       verifiedBytes,
	Decode:       parseVerified,
	MaxSize:      MaxContractSize,
	FileMode:     0o644, // contracts hold no secrets
	DirMode:      0o755,
	ErrConflict:  ErrConflict,
	ErrMalformed: ErrMalformed,
}

// verifiedBytes verifies c and returns its canonical JSON.
func verifiedBytes(c *TaskContract) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil contract", ErrMalformed)
	}
	if err := c.Verify(); err != nil {
		return nil, err
	}
	return c.canonical()
}

// parseVerified parses and verifies stored bytes, which must hold the
// contract with the given ID.
func parseVerified(b []byte, id string) (*TaskContract, error) {
	c, pub, raw, err := parse(b)
	if err != nil {
		return nil, err
	}
	if err := c.checkSignature(pub, raw); err != nil {
		return nil, err
	}
	if c.ID != id {
		return nil, fmt.Errorf("%w: stored under %s but its id is %s", ErrMalformed, id, c.ID)
	}
	return c, nil
}
