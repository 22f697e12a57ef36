package fsutil

import (
	"io/fs"
	"os"
	"syscall"
)

// StampOf returns the stamp of an open file.
func StampOf(f *os.File) (Stamp, error) {
	fi, err := f.Stat()
	if err != nil {
		return Stamp{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Stamp{}, &fs.PathError{Op: "stat", Path: f.Name(), Err: syscall.ENOTSUP}
	}
	var s Stamp
	s.fill(st)
	return s, nil
}

func (s *Stamp) fill(st *syscall.Stat_t) {
	*s = Stamp{
		dev:     uint64(st.Dev),
		ino:     uint64(st.Ino),
		size:    st.Size,
		mode:    st.Mode,
		regular: st.Mode&syscall.S_IFMT == syscall.S_IFREG,
		mtime:   st.Mtim.Nano(),
		ctime:   st.Ctim.Nano(),
	}
}

func (p *StatPath) stat(s *Stamp) error {
	var st syscall.Stat_t
	if err := fstatat(p, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: p.path, Err: err}
	}
	s.fill(&st)
	return nil
}
