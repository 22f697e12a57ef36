//go:build !linux

package fsutil

import (
	"io/fs"
	"os"
)

// StampOf returns the stamp of an open file.
func StampOf(f *os.File) (Stamp, error) {
	fi, err := f.Stat()
	if err != nil {
		return Stamp{}, err
	}
	return stampOfInfo(fi), nil
}

// stampOfInfo has no inode number or change time to go on: the file's
// identity is compared with os.SameFile and its modification time stands
// for the change time.
func stampOfInfo(fi fs.FileInfo) Stamp {
	t := fi.ModTime().UnixNano()
	return Stamp{size: fi.Size(), mode: uint32(fi.Mode()), regular: fi.Mode().IsRegular(), mtime: t, ctime: t, fi: fi}
}

func (p *StatPath) stat(s *Stamp) error {
	fi, err := os.Stat(p.path)
	if err != nil {
		return err
	}
	*s = stampOfInfo(fi)
	return nil
}
