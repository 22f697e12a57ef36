package revocation

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// File is a revocation list backed by a file, for a process that runs
// longer than one revocation. Every call of Revoked first looks at the
// file (one stat(2), without allocating on Linux amd64 and arm64) and, if
// it is not the file last read, re-reads it before it answers: a change
// made before the call began, such as an Append that has returned, is
// always decided on. Callers that arrive while the file is being re-read
// wait for it. Entries of the current list are not verified again when
// the file is re-read. It is safe for concurrent use.
//
// The file is identified by its device and inode, size, mode and
// modification and change times. The file last read is kept open, so
// that its inode cannot be given to a file that replaces it (except on
// Windows, where an open file cannot be replaced). A change in place that
// keeps the size within one tick of the file system's clock leaves the
// same stamp: while the file's change time is within racyWindow of when it
// was read (coarseRacyWindow for a file system that keeps whole seconds),
// every call compares the file's content with what was read instead.
type File struct {
	path  *fsutil.StatPath
	state atomic.Pointer[fileState]
	seed  maphash.Seed

	mu sync.Mutex // serializes reading the file; guards held and closed
	// held is the file last read, kept open; nil when none is.
	held   *os.File
	closed bool
	// Tests set these: duringRead runs between taking the stamp of the
	// file being read and reading it; now replaces time.Now.
	duringRead func()
	now        func() time.Time
}

// fileState is replaced as a whole, so Revoked needs one atomic load.
type fileState struct {
	// list is the last list read successfully. It only ever grows: when
	// the file grew by entries appended (see appended), they are added to
	// it in place.
	list *List
	err  error // why the file cannot be used now; nil when list is current
	// stamp describes the file list or err came from, before it was read;
	// read is false when the last look could not read the file (the next
	// call looks again).
	stamp fsutil.Stamp
	read  bool
	// racy: the file changed too shortly before it was read for its stamp
	// to show a further change, so every call reads the content again.
	racy bool
	sum  uint64 // maphash of the bytes read, to tell a racy file unchanged
	// head is how many bytes of the file, up to the end of its last entry,
	// an append leaves as they are, and headSum their maphash; head is 0
	// when the list is empty or was not read.
	head    int
	headSum uint64
}

// holdOpen says whether the file last read is kept open, so that its
// inode is not reused. Windows refuses to replace an open file.
const holdOpen = runtime.GOOS != "windows"

// OpenFile reads and verifies the list file at path. A missing file is an
// error wrapping fs.ErrNotExist.
func OpenFile(path string) (*File, error) {
	p, err := fsutil.NewStatPath(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	f := &File{path: p, seed: maphash.MakeSeed()}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.reload()
	if st.err != nil && undoInterruptedAppend(path) {
		st = f.reload()
	}
	if st.err != nil {
		f.close()
		return nil, st.err
	}
	return f, nil
}

// Revoked implements dct.Revocations with the list in the file as it is
// when the call begins. While the file cannot be read or is not a valid
// list it returns that error, which denies the token, until the file is
// valid again.
func (f *File) Revoked(blockIDs, signers []string) (revocationID string, revoked bool, err error) {
	if f == nil {
		return "", false, errors.New("no revocation list (nil *revocation.File)")
	}
	st := f.current()
	if st.err != nil {
		return "", false, st.err
	}
	return st.list.Revoked(blockIDs, signers)
}

// current returns the state of the file as it is now: one stat and an
// atomic load when the file is the one last read, else a re-read.
func (f *File) current() *fileState {
	var s fsutil.Stamp
	err := f.path.Stat(&s)
	if st := f.state.Load(); err == nil && st.read && !st.racy && s.Same(st.stamp) {
		return st
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.check()
}

// check re-reads the file unless it is the one last read and was not racy;
// another caller may have re-read it while this one waited for the lock.
func (f *File) check() *fileState {
	if f.closed {
		return f.state.Load()
	}
	var s fsutil.Stamp
	if err := f.path.Stat(&s); err != nil {
		return f.fail(fileError(f.path.Path(), err), nil)
	}
	if st := f.state.Load(); st.read && !st.racy && s.Same(st.stamp) {
		return st
	}
	return f.reload()
}

// Reload reads the file now, whether or not it has changed.
func (f *File) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.state.Load().err
	}
	return f.reload().err
}

// reload reads the file. Content that is the same as last time is not
// parsed again; a file that grew by entries appended has only those parsed;
// entries that the current list holds are not verified again. A file that
// reads but does not parse or verify is remembered, so it is not parsed
// again until it changes.
func (f *File) reload() *fileState {
	started := time.Now()
	if f.now != nil {
		started = f.now()
	}
	r, err := f.read()
	if err != nil {
		return f.fail(err, nil)
	}
	next := &fileState{stamp: r.stamp, read: true}
	next.head = listHead(r.data)
	next.headSum, next.sum = f.sums(r.data, next.head)
	next.racy = r.changedWhileRead || racy(r.stamp, started)
	prev := f.state.Load()
	switch {
	case prev != nil && prev.read && prev.sum == next.sum:
		next.list, next.err = prev.list, prev.err
	case f.appendedTo(prev, r.data):
		next.list = prev.list
	default:
		var known *List
		if prev != nil {
			known = prev.list
		}
		l, err := parseList(r.data, known)
		if err != nil {
			f.hold(r.file)
			return f.fail(fmt.Errorf("revocation list %s: %w", f.path.Path(), err), next)
		}
		next.list = l
	}
	if next.list.Len() == 0 {
		next.head = 0
	}
	f.hold(r.file)
	f.state.Store(next)
	return next
}

// sums returns the maphash of data[:head] and of all of data, in one pass.
func (f *File) sums(data []byte, head int) (headSum, sum uint64) {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.Write(data[:head])
	headSum = h.Sum64()
	h.Write(data[head:])
	return headSum, h.Sum64()
}

// listHead is the length of a list file's bytes up to the end of its last
// entry: what stays as it is when Append adds entries, which it writes
// after a comma, before the closing bracket. It is 0 for data that does
// not end with a bracket.
func listHead(data []byte) int {
	t := bytes.TrimRight(data, jsonSpace)
	if len(t) == 0 || t[len(t)-1] != ']' {
		return 0
	}
	return len(bytes.TrimRight(t[:len(t)-1], jsonSpace))
}

// appendedTo reports whether data is the valid list prev was read from,
// with entries appended, and if so adds those entries to prev's list:
// data starts with prev's head (same length, same hash), then a comma and
// one or more entries, parsed strictly and verified, then the closing
// bracket. The rest of data is not parsed again. Anything else (an error
// included) is left to the parse of the whole file.
func (f *File) appendedTo(prev *fileState, data []byte) bool {
	if prev == nil || !prev.read || prev.err != nil || prev.head == 0 || len(data) <= prev.head {
		return false
	}
	if maphash.Bytes(f.seed, data[:prev.head]) != prev.headSum {
		return false
	}
	tail := bytes.TrimLeft(data[prev.head:], jsonSpace)
	if len(tail) == 0 || tail[0] != ',' {
		return false
	}
	added, err := parseList(append([]byte{'['}, tail[1:]...), prev.list)
	if err != nil || added.Len() == 0 {
		return false
	}
	for _, e := range added.Entries() {
		prev.list.add(e)
	}
	return true
}

// racy reports whether a file with stamp s, read from started on, may
// change again without its stamp changing.
func racy(s fsutil.Stamp, started time.Time) bool {
	window := racyWindow
	if s.Changed().Nanosecond() == 0 {
		window = coarseRacyWindow
	}
	return !s.Changed().Before(started.Add(-window))
}

// readResult is a list file as read: its bytes, the file, still open, and
// its stamp taken before reading.
type readResult struct {
	data             []byte
	file             *os.File
	stamp            fsutil.Stamp
	changedWhileRead bool
}

func (f *File) read() (readResult, error) {
	path := f.path.Path()
	// Not waiting on a FIFO (readOpenList refuses what is not a
	// regular file): a copy in the state directory replaced by one hung
	// the start for ever (red team 7, RT7-7).
	file, err := fsutil.OpenRegular(path)
	if err != nil {
		return readResult{}, fileError(path, err)
	}
	r := readResult{file: file}
	if r.stamp, err = fsutil.StampOf(file); err != nil {
		file.Close()
		return readResult{}, fileError(path, err)
	}
	if f.duringRead != nil {
		f.duringRead()
	}
	if r.data, err = readOpenList(file, path, r.stamp.Regular(), r.stamp.Size()); err != nil {
		file.Close()
		return readResult{}, err
	}
	after, err := fsutil.StampOf(file)
	r.changedWhileRead = err != nil || !after.Same(r.stamp)
	return r, nil
}

// hold keeps file (nil for none) open in place of the file held before.
func (f *File) hold(file *os.File) {
	if f.held != nil {
		f.held.Close()
	}
	f.held = file
	if !holdOpen && file != nil {
		file.Close()
		f.held = nil
	}
}

// fail keeps the last good list for List but makes Revoked return err.
// next, when not nil, is the state of a file that was read but refused:
// it is remembered, so the file is not parsed again until it changes.
func (f *File) fail(err error, next *fileState) *fileState {
	if next == nil {
		next = &fileState{}
	}
	next.list, next.err = NewList(), err
	if st := f.state.Load(); st != nil {
		next.list = st.list
	}
	f.state.Store(next)
	return next
}

// Close releases the file held open. Revoked then returns an error.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.close()
	return nil
}

func (f *File) close() {
	if f.closed {
		return
	}
	f.closed = true
	f.hold(nil)
	f.fail(fmt.Errorf("revocation list %s: closed", f.path.Path()), nil)
}

// List returns a copy of the list as last read successfully, after
// looking at the file as Revoked does.
func (f *File) List() *List { return f.current().list.clone() }

// Err returns the error Revoked returns for every token now, or nil when
// the file reads and verifies.
func (f *File) Err() error { return f.current().err }

// Len returns the number of entries in the list as last read
// successfully, after looking at the file as Revoked does, without
// copying it.
func (f *File) Len() int { return f.current().list.Len() }
