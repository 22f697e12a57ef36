// Package docstore keeps signed documents (task contracts, attestations) by
// ID, in memory or one file per document, and never replaces a stored
// document with a different one. The packages that own the documents supply
// a Codec: how to check an ID, and how to turn a document into verified
// canonical bytes and back.
package docstore

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
	"sync"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// Codec describes one kind of document.
type Codec[T any] struct {
	// Kind names the document in errors, e.g. "contract".
	Kind string
	// ValidID reports whether an ID may be stored (it becomes a file name).
	ValidID func(id string) bool
	// ID is a document's ID.
	ID func(doc T) string
	// Encode verifies a document and returns its canonical bytes.
	Encode func(doc T) ([]byte, error)
	// Decode parses and verifies stored bytes, which must hold the
	// document id.
	Decode func(b []byte, id string) (T, error)
	// MaxSize bounds a stored file.
	MaxSize int64
	// FileMode and DirMode are the modes of the files and of a directory
	// OpenDir creates.
	FileMode, DirMode fs.FileMode
	// ErrConflict is wrapped when a different document is stored under an
	// ID already held; ErrMalformed when an ID or a file is invalid.
	ErrConflict, ErrMalformed error
}

func (c *Codec[T]) badID(id string) error {
	return fmt.Errorf("%w: %s id %q is not valid", c.ErrMalformed, c.Kind, clip(id))
}

// Memory holds documents' canonical bytes in memory. The zero value is
// ready to use; it is safe for concurrent use.
type Memory[T any] struct {
	mu sync.RWMutex
	m  map[string][]byte
}

// Put stores doc, or does nothing if the same document is held.
func (s *Memory[T]) Put(c *Codec[T], doc T) error {
	b, err := c.Encode(doc)
	if err != nil {
		return err
	}
	id := c.ID(doc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[id]; ok {
		if !bytes.Equal(old, b) {
			return fmt.Errorf("%s %s: %w", c.Kind, id, c.ErrConflict)
		}
		return nil
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[id] = b
	return nil
}

// Get returns the document id, decoded and verified again.
func (s *Memory[T]) Get(c *Codec[T], id string) (T, error) {
	s.mu.RLock()
	b, ok := s.m[id]
	s.mu.RUnlock()
	if !ok {
		var zero T
		return zero, fmt.Errorf("%s %q: %w", c.Kind, clip(id), fs.ErrNotExist)
	}
	return c.Decode(b, id)
}

// List returns the stored IDs in ascending order.
func (s *Memory[T]) List() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.m))
	for id := range s.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// lockName is the lock file Put takes in a directory.
const lockName = ".lock"

// Dir keeps one file per document, <dir>/<id>.json, holding its canonical
// JSON and a newline. Put writes a synced temporary file and renames it
// into place under an exclusive lock, so concurrent writers (goroutines or
// processes) never replace a document. Get reads the file again on every
// call and verifies it, whatever its formatting.
type Dir[T any] struct {
	path string
}

// OpenDir returns the store in directory path, creating it if missing.
func OpenDir[T any](c *Codec[T], path string) (*Dir[T], error) {
	if err := os.MkdirAll(path, c.DirMode); err != nil {
		return nil, fmt.Errorf("%s store: %w", c.Kind, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s store: %w", c.Kind, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s store %s is not a directory", c.Kind, path)
	}
	return &Dir[T]{path: path}, nil
}

// Path returns the file that holds (or would hold) the document id.
func (d *Dir[T]) Path(c *Codec[T], id string) (string, error) {
	if !c.ValidID(id) {
		return "", c.badID(id)
	}
	return filepath.Join(d.path, id+".json"), nil
}

// Put stores doc, or does nothing if the same document is held.
func (d *Dir[T]) Put(c *Codec[T], doc T) error {
	b, err := c.Encode(doc)
	if err != nil {
		return err
	}
	id := c.ID(doc)
	path, err := d.Path(c, id)
	if err != nil {
		return err
	}
	unlock, err := fsutil.Lock(filepath.Join(d.path, lockName), c.FileMode)
	if err != nil {
		return fmt.Errorf("lock %s store %s: %w", c.Kind, d.path, err)
	}
	defer unlock()
	old, err := d.Get(c, id)
	switch {
	case err == nil:
		ob, err := c.Encode(old)
		if err != nil {
			return err
		}
		if !bytes.Equal(ob, b) {
			return fmt.Errorf("%s %s in %s: %w", c.Kind, id, d.path, c.ErrConflict)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		// An unreadable or invalid file is left for a person to look at.
		return fmt.Errorf("%s %s: not replacing the stored file: %w", c.Kind, id, err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), c.FileMode); err != nil {
		return fmt.Errorf("write %s %s: %w", c.Kind, path, err)
	}
	return nil
}

// Get returns the document id, read from its file and verified.
func (d *Dir[T]) Get(c *Codec[T], id string) (T, error) {
	var zero T
	path, err := d.Path(c, id)
	if err != nil {
		return zero, err
	}
	b, err := readFile(c, path)
	if err != nil {
		return zero, err
	}
	doc, err := c.Decode(b, id)
	if err != nil {
		return zero, fmt.Errorf("%s file %s: %w", c.Kind, path, err)
	}
	return doc, nil
}

// List returns the IDs of the files named like documents, in ascending
// order. Files are not read; Get verifies each.
func (d *Dir[T]) List(c *Codec[T]) ([]string, error) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("%s store: %w", c.Kind, err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && c.ValidID(id) && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// readFile reads a regular file of at most c.MaxSize bytes.
func readFile[T any](c *Codec[T], path string) ([]byte, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", c.Kind, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", c.Kind, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s file %s is not a regular file", c.Kind, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, c.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", c.Kind, err)
	}
	if int64(len(b)) > c.MaxSize {
		return nil, fmt.Errorf("%w: %s file %s is over the limit of %d bytes", c.ErrMalformed, c.Kind, path, c.MaxSize)
	}
	return b, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
