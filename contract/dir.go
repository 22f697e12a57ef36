package contract

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// fileMode is the mode of a contract file: contracts hold no secrets.
const fileMode fs.FileMode = 0o644

// lockName is the lock file Put takes in the directory.
const lockName = ".lock"

// Dir is a Store with one file per contract, <dir>/<id>.json, holding the
// contract's canonical JSON and a newline. Put writes a synced temporary
// file and renames it into place under an exclusive lock, so concurrent
// writers (goroutines or processes) never replace a contract. Get reads
// the file again on every call and verifies it, and accepts any
// formatting: a contract file may be pretty-printed by hand.
type Dir struct {
	path string
}

// OpenDir returns the Store in directory path, creating it (mode 0755) if
// it is missing.
func OpenDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("contract store: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("contract store: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("contract store %s is not a directory", path)
	}
	return &Dir{path: path}, nil
}

// Path returns the file that holds (or would hold) the contract id. The ID
// must be valid: it becomes part of a path.
func (d *Dir) Path(id string) (string, error) {
	if !ValidID(id) {
		return "", fmt.Errorf("%w: id %q is not %q and 12 lowercase hex digits", ErrMalformed, clip(id), IDPrefix)
	}
	return filepath.Join(d.path, id+".json"), nil
}

// Put implements Store.
func (d *Dir) Put(c *TaskContract) error {
	b, err := verifiedBytes(c)
	if err != nil {
		return err
	}
	path, err := d.Path(c.ID)
	if err != nil {
		return err
	}
	unlock, err := fsutil.Lock(filepath.Join(d.path, lockName), fileMode)
	if err != nil {
		return fmt.Errorf("lock contract store %s: %w", d.path, err)
	}
	defer unlock()
	old, err := d.Get(c.ID)
	switch {
	case err == nil:
		ob, err := old.canonical()
		if err != nil {
			return err
		}
		if !bytes.Equal(ob, b) {
			return fmt.Errorf("contract %s in %s: %w", c.ID, d.path, ErrConflict)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		// An unreadable or invalid file is left for a person to look at.
		return fmt.Errorf("contract %s: not replacing the stored file: %w", c.ID, err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), fileMode); err != nil {
		return fmt.Errorf("write contract %s: %w", path, err)
	}
	return nil
}

// Get implements Store.
func (d *Dir) Get(id string) (*TaskContract, error) {
	path, err := d.Path(id)
	if err != nil {
		return nil, err
	}
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, err := parseVerified(b, id)
	if err != nil {
		return nil, fmt.Errorf("contract file %s: %w", path, err)
	}
	return c, nil
}

// List implements Store: the IDs of the files named like contracts. Files
// are not read; Get verifies each.
func (d *Dir) List() ([]string, error) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("contract store: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && ValidID(id) && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// readFile reads a regular file of at most MaxContractSize bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("contract file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("contract file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("contract file %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxContractSize+1))
	if err != nil {
		return nil, fmt.Errorf("contract file: %w", err)
	}
	if len(b) > MaxContractSize {
		return nil, fmt.Errorf("%w: contract file %s is over the limit of %d bytes", ErrMalformed, path, MaxContractSize)
	}
	return b, nil
}
