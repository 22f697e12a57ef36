package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data: a temporary file in the same
// directory, written, fsynced, closed and renamed over path, then an fsync
// of the directory. A crash leaves either the old or the new file. Errors
// are returned as they come (the caller names what it was writing); on an
// error before the rename the temporary file is removed.
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}
