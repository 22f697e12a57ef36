package chain

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// fileMode is the mode of a new log and its lock file: the log holds the
// tokens of every delegation, which their holders present as credentials.
const fileMode fs.FileMode = 0o600

// File is a Store kept in an append-only log file that survives restarts
// and crashes and may be shared by several processes; see the package
// documentation for the format and the guarantees. Every method first
// replays what other writers have appended since it last looked.
type File struct {
	path string
	stat *fsutil.StatPath // to look at the log before reading it

	mu    sync.Mutex // guards everything below; held across each operation
	s     state
	read  int64 // bytes of the log replayed into s
	lines int   // lines replayed into s
	// log is the log as first opened, when opened is set: it must stay
	// the same file.
	log    fsutil.Stamp
	opened bool
	closed bool
	// syncLog makes an append durable; tests replace it to make it fail.
	syncLog func(*os.File) error
}

var (
	_ Store        = (*File)(nil)
	_ StatusReader = (*File)(nil)
)

// OpenFile opens the log at path, creating it empty (mode 0600) if it does
// not exist, and replays it. A log that does not replay is an error and is
// left as it is.
func OpenFile(path string) (*File, error) {
	return openFile(path, true)
}

// Load reads the log at path, under its lock, and returns every delegation
// in the order they were inserted. A missing log is an error wrapping
// fs.ErrNotExist, never an empty chain. Like every reader it takes the lock
// (path + ".lock", created if missing), so it needs write access to that
// file: a reader that did not lock could see a torn line being cut off and
// replaced, and take the mixture for corruption.
func Load(path string) ([]Delegation, error) {
	f, err := openFile(path, false)
	if err != nil {
		return nil, err
	}
	return f.s.list(), nil
}

func openFile(path string, create bool) (*File, error) {
	// Every name of the log shares one lock, and a later change of
	// directory does not move it.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	stat, err := fsutil.NewStatPath(path)
	if err != nil {
		return nil, fmt.Errorf("chain log %s: %w", path, err)
	}
	f := &File{path: path, stat: stat, syncLog: (*os.File).Sync}
	if !create {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("chain log %s: %w", path, err)
		}
	}
	unlock, err := f.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if create {
		if err := f.create(); err != nil {
			return nil, err
		}
	}
	if err := f.withLog(os.O_RDONLY, func(*os.File, int64) error { return nil }); err != nil {
		return nil, err
	}
	return f, nil
}

// create makes an empty log if there is none, durably.
func (f *File) create() error {
	w, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("chain log %s: %w", f.path, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("chain log %s: %w", f.path, err)
	}
	if err := fsutil.SyncDir(filepath.Dir(f.path)); err != nil {
		return fmt.Errorf("chain log %s: %w", f.path, err)
	}
	return nil
}

func (f *File) lock() (unlock func(), err error) {
	unlock, err = fsutil.Lock(f.path+".lock", fileMode)
	if err != nil {
		return nil, fmt.Errorf("chain log %s: lock: %w", f.path, err)
	}
	return unlock, nil
}

// withLog opens the log with flag, replays what was appended since the last
// look, and calls fn with the open log and its size. The caller holds the
// lock.
func (f *File) withLog(flag int, fn func(log *os.File, size int64) error) error {
	var log *os.File
	var err error
	if flag == os.O_RDONLY {
		// A FIFO in the log's place must not block the open; catchUp
		// refuses it.
		log, err = fsutil.OpenRegular(f.path)
	} else {
		log, err = os.OpenFile(f.path, flag, 0)
	}
	if errors.Is(err, fs.ErrNotExist) && f.opened {
		// Not fs.ErrNotExist, which Get returns for a delegation that
		// is not recorded.
		return fmt.Errorf("chain log %s has disappeared while open: %v", f.path, err)
	}
	if err != nil {
		return fmt.Errorf("chain log %s: %w", f.path, err)
	}
	defer log.Close()
	size, err := f.catchUp(log)
	if err != nil {
		return err
	}
	return fn(log, size)
}

// catchUp replays the lines appended to the log since the last look and
// returns the log's size, which is more than f.read if the log ends with a
// torn line.
func (f *File) catchUp(log *os.File) (int64, error) {
	fi, err := fsutil.StampOf(log)
	if err != nil {
		return 0, fmt.Errorf("chain log %s: %w", f.path, err)
	}
	switch {
	case !fi.Regular():
		return 0, fmt.Errorf("chain log %s is not a regular file", f.path)
	case f.opened && !f.log.SameFile(fi):
		return 0, fmt.Errorf("chain log %s was replaced by another file while open; the log only grows, so this store refuses to go on: reopen it if the replacement is intended", f.path)
	case fi.Size() < f.read:
		return 0, fmt.Errorf("chain log %s shrank from %d to %d bytes while open; the log only grows, so this store refuses to go on", f.path, f.read, fi.Size())
	case fi.Size() > MaxLogSize:
		return 0, fmt.Errorf("chain log %s is %d bytes, over the limit of %d", f.path, fi.Size(), MaxLogSize)
	}
	f.log, f.opened = fi, true
	data := make([]byte, fi.Size()-f.read)
	if _, err := io.ReadFull(io.NewSectionReader(log, f.read, int64(len(data))), data); err != nil {
		return 0, fmt.Errorf("chain log %s: %w", f.path, err)
	}
	n, err := parseLog(data, f.lines+1, func(e *event) error {
		if _, err := f.s.apply(e); err != nil {
			return err
		}
		f.lines++
		return nil
	})
	f.read += int64(n)
	if err != nil {
		return 0, fmt.Errorf("chain log %s is corrupt at %w; it was not changed: restore it from a backup", f.path, err)
	}
	return fi.Size(), nil
}

// view runs fn on the state, caught up with the log.
func (f *File) view(fn func(*state)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.errClosed()
	}
	if f.caughtUp() {
		fn(&f.s)
		return nil
	}
	unlock, err := f.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := f.withLog(os.O_RDONLY, func(*os.File, int64) error { return nil }); err != nil {
		return err
	}
	fn(&f.s)
	return nil
}

// caughtUp reports whether the log is still the file replayed and ends
// where the replay did: then nothing has been appended since, there is
// nothing to read, and the lock is not needed. A writer appends whole
// lines and cuts off only a torn line past the last whole one, so a log of
// the size replayed holds exactly what was replayed. One stat, which does
// not allocate on Linux.
func (f *File) caughtUp() bool {
	var s fsutil.Stamp
	return f.opened && f.stat.Stat(&s) == nil && s.Regular() && s.SameFile(f.log) && s.Size() == f.read
}

// write checks e against the log as it stands, appends it and syncs, and
// only then applies it. A torn line left by a crashed writer is cut off
// first; if the append or the sync fails, the log is cut back to where it
// was.
func (f *File) write(e *event) (changed []string, err error) {
	// Checked before the lock, then again once prepare has named the
	// delegation by its key.
	if _, err := encodeEvent(e); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, f.errClosed()
	}
	unlock, err := f.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	err = f.withLog(os.O_RDWR, func(log *os.File, size int64) error {
		commit, err := f.s.prepare(e)
		if err != nil {
			return err
		}
		line, err := encodeEvent(e)
		if err != nil {
			return err
		}
		end := f.read
		if end+int64(len(line)) > MaxLogSize {
			return fmt.Errorf("chain log %s: this line would take it over the limit of %d bytes; start a new log", f.path, MaxLogSize)
		}
		if size > end {
			if err := log.Truncate(end); err != nil {
				return fmt.Errorf("chain log %s: cut off a torn last line: %w", f.path, err)
			}
		}
		if _, err := log.WriteAt(line, end); err != nil {
			log.Truncate(end)
			return fmt.Errorf("chain log %s: nothing was recorded: %w", f.path, err)
		}
		if err := f.syncLog(log); err != nil {
			log.Truncate(end)
			log.Sync()
			return fmt.Errorf("chain log %s: nothing was recorded (sync failed): %w", f.path, err)
		}
		f.read += int64(len(line))
		f.lines++
		changed = commit()
		return nil
	})
	return changed, err
}

// Insert implements Store. The record is checked against the log as it
// stands under the lock, so two writers never both insert the same ID or
// a child under a delegation the other has just ended.
func (f *File) Insert(d Delegation) error {
	_, err := f.write(&event{Op: opInsert, Delegation: &d})
	return err
}

// Get implements Store.
func (f *File) Get(ref string) (d Delegation, err error) {
	if verr := f.view(func(s *state) { d, err = s.get(ref) }); verr != nil {
		return Delegation{}, verr
	}
	return d, err
}

// WithID implements Store.
func (f *File) WithID(id string) (ds []Delegation, err error) {
	err = f.view(func(s *state) { ds = s.withID(id) })
	return ds, err
}

// Status implements StatusReader. When the log has not changed since the
// last read it costs one stat.
func (f *File) Status(key string) (st Status, recorded bool, err error) {
	err = f.view(func(s *state) { st, recorded = s.status(key) })
	return st, recorded, err
}

// List implements Store.
func (f *File) List() (ds []Delegation, err error) {
	err = f.view(func(s *state) { ds = s.list() })
	return ds, err
}

// Complete implements Store.
func (f *File) Complete(id, attestationID string, at time.Time) error {
	return f.end(opComplete, id, attestationID, at)
}

// Fail implements Store.
func (f *File) Fail(id, attestationID string, at time.Time) error {
	return f.end(opFail, id, attestationID, at)
}

// Revoke implements Store. One line records the revocation; replaying it
// revokes the same descendants.
func (f *File) Revoke(id string, at time.Time) ([]string, error) {
	e, err := statusEvent(opRevoke, id, "", at)
	if err != nil {
		return nil, err
	}
	return f.write(e)
}

func (f *File) end(op, id, attestationID string, at time.Time) error {
	e, err := statusEvent(op, id, attestationID, at)
	if err != nil {
		return err
	}
	_, err = f.write(e)
	return err
}

// Close marks the store closed; every later call is an error. The log is
// not held open between calls, so there is nothing else to release.
// Closing twice does nothing.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *File) errClosed() error {
	return fmt.Errorf("chain log %s: the store is closed", f.path)
}
