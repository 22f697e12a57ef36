// Package docstore keeps signed documents (task contracts, attestations) by
// ID, in memory or one file per document, and never replaces a stored
// document with a different one: the one Store that package contract and
// package attest name for their documents. The packages that own the
// documents supply a Kind, whose Codec says how to check an ID, and how to
// turn a document into verified canonical bytes and back.
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

// Store holds documents by ID; each is verified when it is stored and when
// it is read. A document, once stored, is never replaced by a different
// one. Implementations are safe for concurrent use.
type Store[T any] interface {
	// Put verifies doc and stores it. Storing a document already held is
	// a no-op; a different document with the same ID is an error wrapping
	// the Codec's ErrConflict.
	Put(doc T) error
	// Get returns the document with the given ID, verified. A missing
	// document is an error wrapping fs.ErrNotExist.
	Get(id string) (T, error)
	// List returns the IDs of the stored documents in ascending order.
	List() ([]string, error)
}

// Kind is one kind of document: a type, usually an empty struct, whose
// zero value gives the kind's Codec. As a type parameter of Memory and
// Dir it makes their zero values ready to use.
type Kind[T any] interface {
	Codec() *Codec[T]
}

// codecOf is the Codec of kind K.
func codecOf[T any, K Kind[T]]() *Codec[T] {
	var k K
	return k.Codec()
}

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

// Memory is a Store in memory, of documents of kind K: it holds their
// canonical bytes, and decodes and verifies them again on every Get. The
// zero value is ready to use.
type Memory[T any, K Kind[T]] struct {
	mu sync.RWMutex
	m  map[string][]byte
}

// Put implements Store.
func (s *Memory[T, K]) Put(doc T) error {
	c := codecOf[T, K]()
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

// Get implements Store.
func (s *Memory[T, K]) Get(id string) (T, error) {
	c := codecOf[T, K]()
	s.mu.RLock()
	b, ok := s.m[id]
	s.mu.RUnlock()
	if !ok {
		var zero T
		return zero, fmt.Errorf("%s %q: %w", c.Kind, clip(id), fs.ErrNotExist)
	}
	return c.Decode(b, id)
}

// List implements Store.
func (s *Memory[T, K]) List() ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.m))
	for id := range s.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// lockName is the lock file Put takes in a directory.
const lockName = ".lock"

// Dir is a Store of documents of kind K with one file per document,
// <dir>/<id>.json, holding its canonical JSON and a newline (the Codec's
// FileMode). Put writes a synced temporary file and renames it into place
// under an exclusive lock, so concurrent writers (goroutines or processes)
// never replace a stored document. Get reads the file again on every call
// and verifies it, and accepts any formatting: a file may be
// pretty-printed by hand.
type Dir[T any, K Kind[T]] struct {
	path string
}

// OpenDir returns the Dir in directory path, creating it (the Codec's
// DirMode) if it is missing.
func OpenDir[T any, K Kind[T]](path string) (*Dir[T, K], error) {
	c := codecOf[T, K]()
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
	return &Dir[T, K]{path: path}, nil
}

// Path returns the file that holds (or would hold) the document id.
func (d *Dir[T, K]) Path(id string) (string, error) {
	c := codecOf[T, K]()
	if !c.ValidID(id) {
		return "", c.badID(id)
	}
	return filepath.Join(d.path, id+".json"), nil
}

// Put implements Store.
func (d *Dir[T, K]) Put(doc T) error {
	c := codecOf[T, K]()
	b, err := c.Encode(doc)
	if err != nil {
		return err
	}
	id := c.ID(doc)
	path, err := d.Path(id)
	if err != nil {
		return err
	}
	unlock, err := fsutil.Lock(filepath.Join(d.path, lockName), c.FileMode)
	if err != nil {
		return fmt.Errorf("lock %s store %s: %w", c.Kind, d.path, err)
	}
	defer unlock()
	old, err := d.Get(id)
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

// Get implements Store: the document id, read from its file and verified.
func (d *Dir[T, K]) Get(id string) (T, error) {
	c := codecOf[T, K]()
	var zero T
	path, err := d.Path(id)
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

// List implements Store: the IDs of the files named like documents, in
// ascending order. Files are not read; Get verifies each.
func (d *Dir[T, K]) List() ([]string, error) {
	c := codecOf[T, K]()
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
