//go:build unix

package budget

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// countsEpoch is the state directory's counter of the writes of its
// counts files (epochFile), mapped into the memory of each of its
// proxies: a proxy reads it at each reservation (a load from memory, no
// system call) and reads the counts file again when it moved.
type countsEpoch struct{ mem []byte }

// openEpoch maps the state directory dir's epochFile, made (zeros,
// whole, never written over) if there is none.
func openEpoch(dir string) (*countsEpoch, error) {
	path := filepath.Join(dir, epochFile)
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		t, terr := os.CreateTemp(dir, epochFile+".*.tmp")
		if terr != nil {
			return nil, terr
		}
		_, terr = t.Write(make([]byte, 4096))
		if terr == nil {
			terr = t.Sync()
		}
		t.Close()
		if terr == nil {
			// Whole or not at all; another proxy's made first wins.
			if lerr := os.Link(t.Name(), path); lerr != nil && !errors.Is(lerr, os.ErrExist) {
				terr = lerr
			}
		}
		os.Remove(t.Name())
		if terr != nil {
			return nil, terr
		}
		f, err = os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() < 8 {
		return nil, fmt.Errorf("%s is not a counter delegateos writes: remove it", path)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &countsEpoch{mem: mem}, nil
}

func (e *countsEpoch) load() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&e.mem[0])))
}

// bump records a write of a counts file; it returns the counter after.
func (e *countsEpoch) bump() uint64 {
	return atomic.AddUint64((*uint64)(unsafe.Pointer(&e.mem[0])), 1)
}

func (e *countsEpoch) close() { syscall.Munmap(e.mem) }
