package attest

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

// fileMode is the mode of an attestation file, and dirMode of a directory
// OpenDir creates: an output may be private, so only the owner reads them.
const (
	fileMode fs.FileMode = 0o600
	dirMode  fs.FileMode = 0o700
)

// lockName is the lock file Put takes in the directory.
const lockName = ".lock"

// Dir is a Store with one file per attestation, <dir>/<id>.json, holding the
// attestation's canonical JSON and a newline. Put writes a synced temporary
// file and renames it into place under an exclusive lock, so concurrent
// writers (goroutines or processes) never replace an attestation. Get reads
// the file again on every call and verifies it, and accepts any
// formatting: an attestation file may be pretty-printed by hand.
type Dir struct {
	path string
}

// OpenDir returns the Store in directory path, creating it (mode 0700) if
// it is missing.
func OpenDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, dirMode); err != nil {
		return nil, fmt.Errorf("attestation store: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("attestation store: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("attestation store %s is not a directory", path)
	}
	return &Dir{path: path}, nil
}

// Path returns the file that holds (or would hold) the attestation id. The ID
// must be valid: it becomes part of a path.
func (d *Dir) Path(id string) (string, error) {
	if !ValidID(id) {
		return "", fmt.Errorf("%w: id %q is not %q and 12 lowercase hex digits", ErrMalformed, clip(id), IDPrefix)
	}
	return filepath.Join(d.path, id+".json"), nil
}

// Put implements Store.
func (d *Dir) Put(a *Attestation) error {
	b, err := verifiedBytes(a)
	if err != nil {
		return err
	}
	path, err := d.Path(a.ID)
	if err != nil {
		return err
	}
	unlock, err := fsutil.Lock(filepath.Join(d.path, lockName), fileMode)
	if err != nil {
		return fmt.Errorf("lock attestation store %s: %w", d.path, err)
	}
	defer unlock()
	old, err := d.Get(a.ID)
	switch {
	case err == nil:
		ob, err := old.canonical()
		if err != nil {
			return err
		}
		if !bytes.Equal(ob, b) {
			return fmt.Errorf("attestation %s in %s: %w", a.ID, d.path, ErrConflict)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		// An unreadable or invalid file is left for a person to look at.
		return fmt.Errorf("attestation %s: not replacing the stored file: %w", a.ID, err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), fileMode); err != nil {
		return fmt.Errorf("write attestation %s: %w", path, err)
	}
	return nil
}

// Get implements Store.
func (d *Dir) Get(id string) (*Attestation, error) {
	path, err := d.Path(id)
	if err != nil {
		return nil, err
	}
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	a, err := parseVerified(b, id)
	if err != nil {
		return nil, fmt.Errorf("attestation file %s: %w", path, err)
	}
	return a, nil
}

// List implements Store: the IDs of the files named like attestations. Files
// are not read; Get verifies each.
func (d *Dir) List() ([]string, error) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("attestation store: %w", err)
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

// readFile reads a regular file of at most MaxAttestationSize bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("attestation file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("attestation file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("attestation file %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxAttestationSize+1))
	if err != nil {
		return nil, fmt.Errorf("attestation file: %w", err)
	}
	if len(b) > MaxAttestationSize {
		return nil, fmt.Errorf("%w: attestation file %s is over the limit of %d bytes", ErrMalformed, path, MaxAttestationSize)
	}
	return b, nil
}
