//go:build unix

package budget

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// liveRecords says live records are kept (see live.go).
const liveRecords = true

// isLocked reports whether err is openLocked's for a file whose lock a
// running process holds.
func isLocked(err error) bool { return errors.Is(err, syscall.EWOULDBLOCK) }

// liveRecord is this proxy's live record of one identity and generation,
// mapped into memory; guarded by Redis.mu.
type liveRecord struct {
	f     *os.File // its flock held while the proxy runs
	path  string
	mem   []byte
	id    string
	gen   int64
	slots map[string]int // key → offset of its entry
	next  int            // offset of the next entry
	// checked is each entry's count at the last check (whole), by offset.
	checked map[int]int64
}

// openLive makes the live record at path for identity id, generation
// gen, of machine, by its instance. It is made under the name tmp (see
// Redis.newPrefix), locked and given its header there, then renamed to
// path: a proxy starting meanwhile finds under path only records that
// are whole and locked, or whole and dead, never one between its
// creation and its flock (which it would take for a dead, empty record
// and remove). A starting proxy removes a record under tmp whose lock it
// takes: then the flock or the rename here fails, and another name is
// tried.
func openLive(path, tmp, id string, gen int64, machine, instance string) (*liveRecord, error) {
	if len(id) == 0 || len(id) > 255 || len(machine) > 255 || len(instance) > 255 || len(id)+len(machine)+len(instance)+19 > liveHeader {
		return nil, fmt.Errorf("the identity %q cannot be recorded", id)
	}
	var err error
	for try := 0; try < 5; try++ {
		name := tmp + "." + strconv.Itoa(try)
		var f *os.File
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return nil, err
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if err != nil {
			f.Close() // a starting proxy holds it, and removes it
			if isLocked(err) {
				continue
			}
			return nil, err
		}
		l := &liveRecord{f: f, path: path, id: id, gen: gen, slots: map[string]int{}, next: liveHeader}
		if err = l.mapSize(liveSize); err != nil {
			f.Close()
			os.Remove(name)
			return nil, err
		}
		if err = l.header(gen, id, machine, instance); err != nil {
			l.close(false)
			os.Remove(name)
			return nil, err
		}
		if err = os.Rename(name, path); err != nil {
			// Removed by a starting proxy before this one's flock.
			syscall.Munmap(l.mem)
			f.Close()
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			os.Remove(name)
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("%s could not be made: %w", path, err)
}

// openRecord opens a live record (or one being made) at path, not
// following a symbolic link and not waiting on a FIFO, and takes its
// flock without waiting; with read it reads it, at most the size it has
// (a device would else be read without end). A file that is not a
// regular one is an error: a record is never anything else.
func openRecord(path string, read bool) (*os.File, []byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, errors.New("it is a symbolic link, not a record of counts")
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("it is not a regular file (mode %s)", fi.Mode())
	}
	for err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
		err = nil
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !read {
		return f, nil, nil
	}
	if fi.Size() > maxStateFile {
		f.Close()
		return nil, nil, fmt.Errorf("it is %d bytes, more than a record of counts delegateos writes can be (%d)", fi.Size(), maxStateFile)
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, nil, err
	}
	return f, b[:n], nil
}

// mapSize grows the file to size bytes and maps it. The new bytes are
// written (zeros), not left a hole: a store into a mapped hole of a full
// filesystem is a SIGBUS, which would kill the proxy at a call; a write
// fails with ENOSPC here instead.
func (l *liveRecord) mapSize(size int) error {
	if l.mem != nil {
		// Grown from the size this proxy mapped: a file cut meanwhile
		// would be grown with a hole where its header and counts were.
		if fi, err := l.f.Stat(); err != nil || fi.Size() < int64(len(l.mem)) {
			return &cutError{path: l.path}
		}
	}
	if _, err := l.f.WriteAt(make([]byte, size-len(l.mem)), int64(len(l.mem))); err != nil {
		return err
	}
	mem, err := syscall.Mmap(int(l.f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return err
	}
	if l.mem != nil {
		syscall.Munmap(l.mem)
	}
	l.mem = mem
	return nil
}

// header writes the record's header, its magic last: a header without
// it was never whole.
func (l *liveRecord) header(gen int64, id, machine, instance string) (err error) {
	defer guardFault(l.path, &err, debug.SetPanicOnFault(true))
	binary.NativeEndian.PutUint64(l.mem[8:], uint64(gen))
	l.mem[16] = byte(len(id))
	copy(l.mem[17:], id)
	l.mem[17+len(id)] = byte(len(machine))
	copy(l.mem[18+len(id):], machine)
	l.mem[18+len(id)+len(machine)] = byte(len(instance))
	copy(l.mem[19+len(id)+len(machine):], instance)
	copy(l.mem, liveMagic)
	return nil
}

// raise records that key counted n calls: a store into the mapped page
// (a new key also writes its entry, and rarely grows the file). A file
// cut while mapped is a cutError, not a SIGBUS (see guardFault): the
// caller takes a new record (Redis.renewLive).
func (l *liveRecord) raise(key string, n int64) (err error) {
	defer guardFault(l.path, &err, debug.SetPanicOnFault(true))
	off, ok := l.slots[key]
	if !ok {
		need := 16 + (len(key)+7)&^7
		if l.next+need+16 > len(l.mem) {
			size := len(l.mem) * 2
			for l.next+need+16 > size {
				size *= 2
			}
			if err := l.mapSize(size); err != nil {
				return err
			}
		}
		off = l.next
		atomic.StoreInt64((*int64)(unsafe.Pointer(&l.mem[off])), n)
		copy(l.mem[off+16:], key)
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&l.mem[off+8])), uint32(len(key)))
		l.next += need
		l.slots[key] = off
		return nil
	}
	p := (*int64)(unsafe.Pointer(&l.mem[off]))
	if n > atomic.LoadInt64(p) {
		atomic.StoreInt64(p, n)
	}
	return nil
}

// whole reports whether the record is still what this proxy keeps its
// raises in: its file no shorter than mapped, its header this proxy's,
// and its path naming it (a starting proxy finds and folds records by
// their names). A record cut, rewritten in place (a restore), renamed
// away or replaced by another file would lose the raises if the proxy
// were then killed; checked off the calls' path (Redis.checkLive).
func (l *liveRecord) whole() (ok bool) {
	fi, err := l.f.Stat()
	if err != nil || fi.Size() < int64(len(l.mem)) {
		return false
	}
	pi, err := os.Lstat(l.path)
	if err != nil || !os.SameFile(fi, pi) {
		return false
	}
	var ferr error
	func() {
		defer guardFault(l.path, &ferr, debug.SetPanicOnFault(true))
		ok = l.entriesWhole()
	}()
	return ok && ferr == nil
}

// entriesWhole reports whether the record's header and entries are those
// this proxy wrote, each count no lower than at the last check: a record
// rewritten in place (an older copy of it restored over it) holds lower
// counts, or entries of zero length that end it early.
func (l *liveRecord) entriesWhole() bool {
	if string(l.mem[:len(liveMagic)]) != liveMagic || int64(binary.NativeEndian.Uint64(l.mem[8:])) != l.gen {
		return false
	}
	if l.checked == nil {
		l.checked = make(map[int]int64, len(l.slots))
	}
	for key, off := range l.slots {
		n := atomic.LoadInt64((*int64)(unsafe.Pointer(&l.mem[off])))
		if atomic.LoadUint32((*uint32)(unsafe.Pointer(&l.mem[off+8]))) != uint32(len(key)) || string(l.mem[off+16:off+16+len(key)]) != key || n < l.checked[off] {
			return false
		}
		l.checked[off] = n
	}
	return true
}

// close unmaps the record and drops its lock, removing the file when
// remove (its counts are in the counts file) and its path still names it
// (not another file put there since).
func (l *liveRecord) close(remove bool) {
	if l.mem != nil {
		syscall.Munmap(l.mem)
		l.mem = nil
	}
	if remove {
		fi, ferr := l.f.Stat()
		pi, perr := os.Lstat(l.path)
		if ferr == nil && perr == nil && os.SameFile(fi, pi) {
			os.Remove(l.path)
		}
	}
	l.f.Close()
}

// maxStateFile bounds what is read of a state file or live record: one
// larger (a sparse file of terabytes: a corrupt filesystem, a mistaken
// restore) is refused, naming it, before its size is allocated, which
// would else crash the proxy (runtime: out of memory) or take its memory
// (red team 7, RT7-6). Far above what delegateos writes there.
const maxStateFile = 256 << 20

// readStateFile reads a file the state directory keeps (the counts, the
// list of instances) as openRecord reads a record: not following a
// symbolic link, not waiting on a FIFO, a regular file only, at most its
// size. A file that is not one is an error naming what it is (fail
// closed), never a start that hangs.
func readStateFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("a symbolic link, not a file delegateos writes")}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("not a regular file (mode %s)", fi.Mode())}
	}
	if fi.Size() > maxStateFile {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%d bytes, more than a file delegateos writes there can be (%d)", fi.Size(), maxStateFile)}
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}
