//go:build unix

package budget

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// countsEpoch is the state directory's counter of the writes of its
// counts files (epochFile), mapped into the memory of each of its
// proxies: a proxy reads it at each reservation (a load from memory, no
// system call) and reads the counts file again when it moved. The file
// stays open, for the proxy to see it cut (fstat) or replaced (its
// device and inode no longer the path's: see Redis.checkEpoch).
type countsEpoch struct {
	mem      []byte
	f        *os.File
	path     string
	dev, ino uint64
}

// openEpoch maps the state directory dir's epochFile, made (whole, never
// written over) if there is none. One cut shorter than its counter (the
// user's `: > counts-epoch`, a restore tool rewriting it in place) holds
// nothing the proxies need, only a signal: it is replaced by a whole one,
// under the epoch's lock, unless another proxy did so first; the proxies
// mapping the cut one see theirs replaced and map the new one (see
// Redis.checkEpoch). A file that is not a regular one is refused.
func openEpoch(dir string) (*countsEpoch, error) {
	path := filepath.Join(dir, epochFile)
	for try := 0; ; try++ {
		e, err := mapEpoch(path)
		if !errors.Is(err, errEpochCut) && !errors.Is(err, os.ErrNotExist) || try == 3 {
			return e, err
		}
		if err := makeEpoch(dir, path); err != nil {
			return nil, err
		}
	}
}

// errEpochCut is mapEpoch's for a counts epoch shorter than its counter,
// or with another name (a hard link): replaced by makeEpoch.
var errEpochCut = errors.New("cut shorter than a counter, or another file's link")

func mapEpoch(path string) (*countsEpoch, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a counter delegateos writes (mode %s): remove it", path, fi.Mode())
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Size() < 8 || st.Nlink != 1 {
		// Cut, or a hard link to another file (`ln -f`), whose first
		// bytes the bumps would overwrite.
		f.Close()
		return nil, fmt.Errorf("%s is %w (%d bytes, %d links)", path, errEpochCut, fi.Size(), st.Nlink)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &countsEpoch{mem: mem, f: f, path: path, dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// makeEpoch puts a whole counts epoch at path when there is none there,
// or one cut short (or a hard link to another file): made under a temporary name, then linked (none) or
// renamed (cut) into place, under the epoch's lock, so that two proxies
// finding it cut at once replace it once. It starts at a random value: a
// proxy that last read the old one at some value never takes the new
// one's for it.
func makeEpoch(dir, path string) error {
	lock, err := lockWait(path + ".lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	fi, err := os.Lstat(path)
	if err == nil && (!fi.Mode().IsRegular() || fi.Size() >= 8 && fi.Sys().(*syscall.Stat_t).Nlink == 1) {
		return nil // whole (another proxy's), or refused by mapEpoch
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	cut := err == nil
	t, err := os.CreateTemp(dir, epochFile+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(t.Name())
	b := make([]byte, 4096)
	rand.Read(b[:8])
	binary.NativeEndian.PutUint64(b, binary.NativeEndian.Uint64(b)>>1)
	_, err = t.Write(b)
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if cut {
		return os.Rename(t.Name(), path)
	}
	// Whole or not at all; another proxy's made first wins.
	if err := os.Link(t.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

func (e *countsEpoch) load() (v uint64, err error) {
	defer guardFault(e.path, &err, debug.SetPanicOnFault(true))
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&e.mem[0]))), nil
}

// bump records a write of a counts file; it returns the counter after.
func (e *countsEpoch) bump() (v uint64, err error) {
	defer guardFault(e.path, &err, debug.SetPanicOnFault(true))
	return atomic.AddUint64((*uint64)(unsafe.Pointer(&e.mem[0])), 1), nil
}

// replaced reports whether the epoch's path no longer names the file
// mapped (removed, replaced by a rename, its directory moved), or the
// file mapped was cut.
func (e *countsEpoch) replaced() bool {
	if e.cut() {
		return true
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(e.path, &st); err != nil {
		return true
	}
	return uint64(st.Dev) != e.dev || uint64(st.Ino) != e.ino
}

// cut reports whether the file mapped is shorter than its counter.
func (e *countsEpoch) cut() bool {
	fi, err := e.f.Stat()
	return err != nil || fi.Size() < 8
}

func (e *countsEpoch) close() {
	syscall.Munmap(e.mem)
	e.f.Close()
}
