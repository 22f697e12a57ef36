package ratelimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/jsonlines"
)

// fileMode is the mode of a new file and its lock file: the proxy's own
// state, read by nobody else.
const fileMode fs.FileMode = 0o600

// ErrInUse is matched (errors.Is) by the error of OpenFile when another
// Limiter, in this process or another, holds the file.
var ErrInUse = errors.New("rate-limit file in use")

type inUseError struct{ path string }

func (e *inUseError) Error() string {
	return fmt.Sprintf("rate-limit file %s is in use by another delegateos process (its lock %s.lock is held); stop that process or give this one its own file", e.path, e.path)
}

func (e *inUseError) Is(target error) bool { return target == ErrInUse }

// file is where a Limiter keeps its logs. Its methods are called with the
// Limiter's mutex held, after the change they record is made in memory;
// logs appends what the memory holds, for a rewrite.
type file struct {
	path   string
	mode   fs.FileMode
	unlock func()
	log    *os.File // open for appending; nil if reopening it failed
	// dirty, when not nil, says why the file may not hold what the logs
	// hold (a write failed). The file is then rewritten before anything
	// is appended to it again, and admissions are refused until that works.
	dirty error
	lines int // lines appended since the last rewrite
	buf   []byte
}

// OpenFile returns a Limiter, with the limits named in limits, that keeps
// its logs in the file at path as well as in memory, creating the file if
// it does not exist. It holds the file until Close: a second OpenFile of
// the same file, from any process, fails with an error matching ErrInUse.
// The file is read as of now, and rewritten compactly. Admissions recorded
// under a limit name that limits does not hold are dropped.
func OpenFile(path string, limits map[string]Limit, now time.Time) (*Limiter, error) {
	l, err := New(limits)
	if err != nil {
		return nil, err
	}
	// Every name of the file shares one lock, and the rewrite replaces the
	// file rather than a symbolic link to it.
	path, unlock, err := jsonlines.Lock(path, fileMode)
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, &inUseError{path}
	}
	if err != nil {
		return nil, fmt.Errorf("rate-limit file %s: lock: %w", path, err)
	}
	f := &file{path: path, mode: fileMode, unlock: unlock}
	if err := f.load(l, now); err != nil {
		unlock()
		return nil, err
	}
	l.file = f
	return l, nil
}

// load replays the file into l's logs and rewrites it.
func (f *file) load(l *Limiter, now time.Time) error {
	// An existing file's mode is kept by its rewrites.
	data, mode, err := jsonlines.ReadFile("rate-limit file", f.path, f.mode)
	if err != nil {
		return err
	}
	f.mode = mode
	if _, err := parseLog(data, l.replay); err != nil {
		return fmt.Errorf("rate-limit file %s is corrupt at %w; it was not changed: repair the line, or remove the file to start every window afresh", f.path, err)
	}
	l.settle(l.nanos(now))
	if err := f.compact(l.appendLogs); err != nil {
		return fmt.Errorf("rate-limit file %s: rewrite: %w", f.path, err)
	}
	return nil
}

// admit records a, which the logs already hold. keys is how many keys the
// logs have, which puts off a rewrite while there are more than the lines.
func (f *file) admit(a Admission, keys int, logs func([]byte) []byte) error {
	f.buf = appendEntry(f.buf[:0], entry{at: []int64{a.at}, keys: a.keys})
	if err := f.write(keys, logs); err != nil {
		return fmt.Errorf("rate-limit file %s: cannot record the call, so it is refused: %w", f.path, err)
	}
	return nil
}

// release records that a, which the logs no longer hold, was given back.
func (f *file) release(a Admission, keys int, logs func([]byte) []byte) error {
	f.buf = appendEntry(f.buf[:0], entry{op: opRelease, at: []int64{a.at}, keys: a.keys})
	if err := f.write(keys, logs); err != nil {
		return fmt.Errorf("rate-limit file %s: cannot record a release (it counts in this process; the file counts the call until it is rewritten): %w", f.path, err)
	}
	return nil
}

// write makes the file hold the logs: by appending f.buf, without a sync,
// or, if an earlier write failed, by rewriting the file from the logs.
func (f *file) write(keys int, logs func([]byte) []byte) error {
	if f.dirty != nil || f.log == nil {
		return f.compact(logs)
	}
	if _, err := f.log.Write(f.buf); err != nil {
		// Part of the line may be in the file; nothing is appended after it.
		f.dirty = err
		return err
	}
	f.lines++
	if f.lines >= max(compactLines, keys) {
		// The line is written whatever this does; a failure sets dirty.
		f.compact(logs)
	}
	return nil
}

// compact rewrites the file from the logs (temporary file, fsync, rename,
// fsync of the directory) and reopens it for appending. Any failure
// leaves the file dirty.
func (f *file) compact(logs func([]byte) []byte) error {
	log, err := jsonlines.Rewrite(f.log, f.path, logs(nil), f.mode)
	f.log = log
	if err != nil {
		f.dirty = err
		return err
	}
	f.dirty = nil
	f.lines = 0
	return nil
}

// close rewrites the file from the logs, closes it and lets the lock go.
func (f *file) close(logs func([]byte) []byte) error {
	err := f.compact(logs)
	if err != nil {
		err = fmt.Errorf("rate-limit file %s: rewrite: %w", f.path, err)
	}
	if f.log != nil {
		if cerr := f.log.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("rate-limit file %s: %w", f.path, cerr)
		}
		f.log = nil
	}
	f.unlock()
	return err
}
