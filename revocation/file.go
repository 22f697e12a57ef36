package revocation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// FileOptions configure a File.
type FileOptions struct {
	// CheckInterval is how often Revoked looks at the file for changes:
	// zero means DefaultCheckInterval, a negative value means on every call.
	CheckInterval time.Duration
}

// File is a revocation list backed by a file, re-read when the file
// changes, for a process that runs longer than one revocation. Revoked
// looks at the file (one stat) at most once per CheckInterval and re-reads
// it when its size, modification time or identity (inode) has changed;
// Append's rename always changes the identity. An in-place edit that keeps
// the size within the file system's timestamp resolution can go unseen
// until Reload. It is safe for concurrent use.
type File struct {
	path     string
	interval time.Duration
	epoch    time.Time    // origin of next, read on the monotonic clock
	next     atomic.Int64 // nanoseconds after epoch when the file is next looked at
	state    atomic.Pointer[fileState]

	mu sync.Mutex // serializes looking at and reading the file; guards read
	// read describes the file the current state came from; nil when the
	// last attempt failed to open or read it, so that the next look retries.
	read fs.FileInfo
}

// fileState is replaced as a whole, so Revoked needs one atomic load.
type fileState struct {
	list *List // the last list read successfully; never modified
	err  error // why the file cannot be used now; nil when list is current
}

// OpenFile reads and verifies the list file at path. A missing file is an
// error wrapping fs.ErrNotExist.
func OpenFile(path string, opts FileOptions) (*File, error) {
	f := &File{path: path, interval: opts.CheckInterval, epoch: time.Now()}
	if f.interval == 0 {
		f.interval = DefaultCheckInterval
	}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	f.next.Store(int64(f.interval))
	return f, nil
}

// Revoked implements dct.Revocations with the list as last read from the
// file. While the file cannot be read or is not a valid list it returns
// that error, which denies the token, until the file is valid again.
func (f *File) Revoked(blockIDs, signers []string) (revocationID string, revoked bool, err error) {
	if f == nil {
		return "", false, errors.New("no revocation list (nil *revocation.File)")
	}
	f.maybeCheck()
	st := f.state.Load()
	if st.err != nil {
		return "", false, st.err
	}
	return st.list.Revoked(blockIDs, signers)
}

// maybeCheck looks at the file if it is time to. Of the calls that find it
// is time, one does the work and the others go on with the current list.
func (f *File) maybeCheck() {
	if f.interval < 0 {
		f.check()
		return
	}
	now := int64(time.Since(f.epoch))
	next := f.next.Load()
	if now < next || !f.next.CompareAndSwap(next, now+int64(f.interval)) {
		return
	}
	f.check()
}

// check re-reads the file if it is not the one last read.
func (f *File) check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		f.read = nil
		f.fail(fileError(f.path, err))
		return
	}
	if f.read != nil && sameFile(f.read, fi) {
		return
	}
	f.reload()
}

func sameFile(a, b fs.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

// Reload reads the file now, whether or not it has changed.
func (f *File) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reload()
}

// reload reads the file; entries that the current list holds are not
// verified again. A file that reads but does not parse or verify is
// remembered, so it is not read again until it changes.
func (f *File) reload() error {
	data, fi, err := readListFile(f.path)
	f.read = fi
	if err != nil {
		f.fail(err)
		return err
	}
	var known *List
	if st := f.state.Load(); st != nil {
		known = st.list
	}
	l, err := parseList(data, known)
	if err != nil {
		err = fmt.Errorf("revocation list %s: %w", f.path, err)
		f.fail(err)
		return err
	}
	f.state.Store(&fileState{list: l})
	return nil
}

// fail keeps the last good list for List but makes Revoked return err.
func (f *File) fail(err error) {
	l := NewList()
	if st := f.state.Load(); st != nil {
		l = st.list
	}
	f.state.Store(&fileState{list: l, err: err})
}

// List returns a copy of the list as last read successfully.
func (f *File) List() *List { return f.state.Load().list.clone() }

// Err returns the error Revoked currently returns for every token, or nil
// when the file was read and verified at the last look.
func (f *File) Err() error { return f.state.Load().err }
