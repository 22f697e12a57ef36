package contract

import (
	"fmt"

	"github.com/delegateos/delegateos/internal/docstore"
)

// Store holds verified contracts by ID. A contract, once stored, is never
// replaced by a different one. Implementations are safe for concurrent use.
type Store interface {
	// Put verifies c and stores it. Storing a contract already held is a
	// no-op; a different contract with the same ID is an error wrapping
	// ErrConflict.
	Put(c *TaskContract) error
	// Get returns the contract with the given ID, verified. A missing
	// contract is an error wrapping fs.ErrNotExist.
	Get(id string) (*TaskContract, error)
	// List returns the IDs of the stored contracts in ascending order.
	List() ([]string, error)
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Dir)(nil)
)

// codec is how package docstore stores contracts.
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

// Memory is a Store in memory. The zero value is ready to use.
type Memory struct {
	m docstore.Memory[*TaskContract]
}

// Put implements Store.
func (s *Memory) Put(c *TaskContract) error { return s.m.Put(codec, c) }

// Get implements Store.
func (s *Memory) Get(id string) (*TaskContract, error) { return s.m.Get(codec, id) }

// List implements Store.
func (s *Memory) List() ([]string, error) { return s.m.List(), nil }

// Dir is a Store with one file per contract, <dir>/<id>.json, holding its
// canonical JSON and a newline (mode 644). Put writes a synced temporary
// file and renames it into place under an exclusive lock, so concurrent
// writers (goroutines or processes) never replace a stored contract. Get reads
// the file again on every call and verifies it, and accepts any
// formatting: a file may be pretty-printed by hand.
type Dir struct{ d *docstore.Dir[*TaskContract] }

// OpenDir returns the Store in directory path, creating it (mode 0755) if
// it is missing.
func OpenDir(path string) (*Dir, error) {
	d, err := docstore.OpenDir(codec, path)
	if err != nil {
		return nil, err
	}
	return &Dir{d}, nil
}

// Path returns the file that holds (or would hold) the contract id.
func (d *Dir) Path(id string) (string, error) { return d.d.Path(codec, id) }

// Put implements Store.
func (d *Dir) Put(c *TaskContract) error { return d.d.Put(codec, c) }

// Get implements Store.
func (d *Dir) Get(id string) (*TaskContract, error) { return d.d.Get(codec, id) }

// List implements Store: the IDs of the files named like contracts. Files
// are not read; Get verifies each.
func (d *Dir) List() ([]string, error) { return d.d.List(codec) }

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
