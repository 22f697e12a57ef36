//go:build unix

package budget

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
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
}

// openLive makes the live record at path for identity id, generation
// gen, of machine, by its instance.
func openLive(path, id string, gen int64, machine, instance string) (*liveRecord, error) {
	if len(id) == 0 || len(id) > 255 || len(machine) > 255 || len(instance) > 255 || len(id)+len(machine)+len(instance)+19 > liveHeader {
		return nil, fmt.Errorf("the identity %q cannot be recorded", id)
	}
	f, err := openLocked(path, true)
	if err != nil {
		return nil, err
	}
	l := &liveRecord{f: f, path: path, id: id, gen: gen, slots: map[string]int{}, next: liveHeader}
	if err := l.mapSize(liveSize); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	binary.NativeEndian.PutUint64(l.mem[8:], uint64(gen))
	l.mem[16] = byte(len(id))
	copy(l.mem[17:], id)
	l.mem[17+len(id)] = byte(len(machine))
	copy(l.mem[18+len(id):], machine)
	l.mem[18+len(id)+len(machine)] = byte(len(instance))
	copy(l.mem[19+len(id)+len(machine):], instance)
	copy(l.mem, liveMagic) // last: a header without it was never whole
	return l, nil
}

// mapSize grows the file to size bytes and maps it. The new bytes are
// written (zeros), not left a hole: a store into a mapped hole of a full
// filesystem is a SIGBUS, which would kill the proxy at a call; a write
// fails with ENOSPC here instead.
func (l *liveRecord) mapSize(size int) error {
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

// raise records that key counted n calls: a store into the mapped page
// (a new key also writes its entry, and rarely grows the file).
func (l *liveRecord) raise(key string, n int64) error {
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

// close unmaps the record and drops its lock, removing the file when
// remove (its counts are in the counts file).
func (l *liveRecord) close(remove bool) {
	if l.mem != nil {
		syscall.Munmap(l.mem)
		l.mem = nil
	}
	if remove {
		os.Remove(l.path)
	}
	l.f.Close()
}
