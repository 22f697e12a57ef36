package revocation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// listFileMode is the mode of a new list file: it holds no secrets.
const listFileMode fs.FileMode = 0o644

// Load reads and verifies the list file at path. A missing file is an
// error wrapping fs.ErrNotExist, never an empty list.
//
// A redis:// or rediss:// URL reads the list kept in Redis there, every
// entry verified.
func Load(path string) (*List, error) {
	if redisconn.IsURL(path) {
		return loadRedis(path)
	}
	data, _, err := readListFile(path)
	if err != nil {
		return nil, err
	}
	l, err := ParseList(data)
	if err != nil {
		return nil, fmt.Errorf("revocation list %s: %w", path, err)
	}
	return l, nil
}

// readListFile reads a list file and returns the file information of what
// it read (taken from the open file, so it describes exactly these bytes).
func readListFile(path string) ([]byte, fs.FileInfo, error) {
	f, err := fsutil.OpenRegular(path) // a FIFO is refused, not waited on
	if err != nil {
		return nil, nil, fileError(path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fileError(path, err)
	}
	data, err := readOpenList(f, path, fi.Mode().IsRegular(), fi.Size())
	if err != nil {
		return nil, nil, err
	}
	return data, fi, nil
}

// readOpenList reads an open list file, which must be a regular file
// (regular) of at most MaxListSize bytes (size, as stat reported it).
func readOpenList(f *os.File, path string, regular bool, size int64) ([]byte, error) {
	if !regular {
		return nil, fmt.Errorf("revocation list %s is not a regular file", path)
	}
	if size > MaxListSize {
		return nil, fmt.Errorf("revocation list %s is %d bytes, over the limit of %d", path, size, MaxListSize)
	}
	// One read of the whole file, plus one to see that it has not grown.
	var buf bytes.Buffer
	buf.Grow(int(size) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxListSize+1)); err != nil {
		return nil, fileError(path, err)
	}
	return buf.Bytes(), nil
}

// fileError explains an error opening or reading a list file. A missing
// list gets its own message: the cause is usually a mistyped path.
func fileError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("revocation list %s: %w; check the path (a missing list is never read as empty)", path, fs.ErrNotExist)
	}
	return fmt.Errorf("revocation list %s: %w", path, err)
}

// Append verifies e and adds it to the list file at path, creating the
// file if it is missing. Adding an entry the file already holds does
// nothing. Writers take an exclusive lock on path+".lock" (which is left in
// place), read the list, and replace it with a synced temporary file, so
// concurrent appends from any number of goroutines or processes never lose
// an entry and a crash leaves either the old or the new list. It reads
// and verifies the whole list: a process that keeps the list open appends
// with File.Append, at the cost of the entry alone. A list that
// does not parse and verify is an error and is left untouched.
//
// A redis:// or rediss:// URL adds the entry to the list kept in Redis
// there, in one script that also announces it to every proxy following
// the list.
func Append(path string, e Entry) error {
	if err := e.Verify(); err != nil {
		return err
	}
	if redisconn.IsURL(path) {
		return appendRedis(path, e, 0)
	}
	return appendFile(path, e)
}

// appendFile adds verified entries to the list file at path, in one
// write.
func appendFile(path string, entries ...Entry) error {
	// Write through a symbolic link rather than replace it, and let every
	// name for the file share one lock.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	// A list with several names (hard links; a single file bind-mounted
	// into a container pins its inode the same way): replacing the name
	// given would leave the others, which a proxy may be reading, on the old
	// file. It is rewritten in place instead, under a lock on the file
	// itself, which every name shares (lockForWrite).
	unlock, err := lockForWrite(path)
	if err != nil {
		return err
	}
	defer unlock()
	if err := recoverAppend(path); err != nil {
		return err
	}
	l, mode := NewList(), listFileMode
	data, fi, err := readListFile(path)
	switch {
	case err == nil:
		if l, err = ParseList(data); err != nil {
			return fmt.Errorf("revocation list %s: %w; not appending to it", path, err)
		}
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	// An entry for a block its revoker has revoked already adds nothing a
	// verifier uses (the scope decides nothing, the time is not compared):
	// without this, one revoker could grow the list without bound.
	added := false
	for _, e := range entries {
		if !l.revokedBy(e.RevocationID, e.RevokedBy) {
			l.add(e)
			added = true
		}
	}
	if !added {
		return nil
	}
	out, err := l.fileBytes()
	if err != nil {
		return err
	}
	if fi != nil && fsutil.Links(fi) > 1 {
		return rewriteInPlace(path, out)
	}
	return writeFileAtomic(path, out, mode)
}

// AppendReplicas is Append to a Redis list that returns only once the
// entry is on replicas replicas of the list's primary as well (WAIT), or
// fails saying how many have it. With 0 it is Append.
func AppendReplicas(rawURL string, e Entry, replicas int) error {
	if replicas == 0 {
		return Append(rawURL, e)
	}
	if err := e.Verify(); err != nil {
		return err
	}
	if !redisconn.IsURL(rawURL) {
		return fmt.Errorf("--replicas needs a Redis list, not the file %s", rawURL)
	}
	return appendRedis(rawURL, e, replicas)
}

// rewriteInPlace writes data over the file at path, keeping its inode (and
// so every name it has), then cuts it to length and syncs it. A reader that
// looks meanwhile may see a list that does not parse, and refuses every
// token until the write is done: it never sees an entry go missing.
func rewriteInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write revocation list %s: %w", path, err)
	}
	if _, err = f.WriteAt(data, 0); err == nil {
		if err = f.Truncate(int64(len(data))); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write revocation list %s: %w", path, err)
	}
	return nil
}

// writeFileAtomic replaces path with data (see fsutil.WriteFileAtomic),
// naming the list in any error.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	if err := fsutil.WriteFileAtomic(path, data, mode); err != nil {
		return fmt.Errorf("write revocation list %s: %w", path, err)
	}
	return nil
}
