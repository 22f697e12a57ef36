package jsonlines

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// Lock takes the lock of the log at path, path+".lock" (created with
// mode), without waiting, for as long as one process keeps the log. path
// is first resolved (symbolic links, then made absolute), and the
// resolved path returned, error or not: every name of the log shares one
// lock, a rewrite replaces the file rather than a link to it, and a later
// change of directory does not move it. A lock held by another open file,
// in this process or another, is an error wrapping fsutil.ErrLocked.
func Lock(path string, mode fs.FileMode) (resolved string, unlock func(), err error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	unlock, err = fsutil.TryLock(path+".lock", mode)
	return path, unlock, err
}

// ReadFile returns the bytes of the log at path, nil if there is none
// yet, and the mode its rewrites keep: an existing file's, else mode. what
// names the log in errors ("spend store").
func ReadFile(what, path string, mode fs.FileMode) ([]byte, fs.FileMode, error) {
	r, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, mode, nil
	}
	if err != nil {
		return nil, mode, fmt.Errorf("%s %s: %w", what, path, err)
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return nil, mode, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, mode, fmt.Errorf("%s %s is not a regular file", what, path)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, mode, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return data, fi.Mode().Perm(), nil
}

// Rewrite replaces the log at path with data (fsutil.WriteFileAtomic:
// temporary file, fsync, rename, fsync of the directory) and returns it
// open for appending, or nil if it cannot be reopened. log, the log open
// for appending until now (nil for none), is closed first: some systems
// cannot rename over an open file. On an error the file may or may not
// hold data (the rename may have happened but not the directory's sync,
// so a crash could bring back the old file): nothing may be appended to
// it until a Rewrite succeeds.
func Rewrite(log *os.File, path string, data []byte, mode fs.FileMode) (*os.File, error) {
	if log != nil {
		log.Close()
	}
	err := fsutil.WriteFileAtomic(path, data, mode)
	reopened, oerr := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if oerr != nil {
		reopened = nil
		if err == nil {
			err = oerr
		}
	}
	return reopened, err
}
