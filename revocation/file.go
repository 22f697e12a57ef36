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

// File is a revocation list backed by a file, for a process that runs
// longer than one revocation. Revoked looks at the file (one stat) at most
// once per CheckInterval, in the background, and re-reads it when its size,
// modification time or identity (device and inode) has changed. Append's
// rename always changes the identity, so an Append is in force within
// CheckInterval plus the time to read the list; an edit in place that keeps
// the size, within the file system's timestamp resolution, may go unseen
// until Reload. Entries of the current list are not verified again when the
// file is re-read. It is safe for concurrent use.
type File struct {
	path     string
	interval time.Duration
	// due is set by a timer CheckInterval after each look at the file, so
	// that the fast path of Revoked reads one atomic flag, not the clock.
	due   atomic.Bool
	state atomic.Pointer[fileState]

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
	f := &File{path: path, interval: opts.CheckInterval}
	if f.interval == 0 {
		f.interval = DefaultCheckInterval
	}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	f.arm()
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

// maybeCheck starts a look at the file if it is time to. With a positive
// CheckInterval the look runs in the background, so no call waits for a
// large list to be read and verified: until it is done, Revoked answers
// from the list as last read.
func (f *File) maybeCheck() {
	if f.interval < 0 {
		f.check()
		return
	}
	if f.due.Load() && f.due.CompareAndSwap(true, false) {
		go func() {
			f.check()
			f.arm()
		}()
	}
}

// arm makes the next call of Revoked after CheckInterval look at the file.
// A File nobody calls holds at most one pending timer.
func (f *File) arm() {
	if f.interval > 0 {
		time.AfterFunc(f.interval, func() { f.due.Store(true) })
	}
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
