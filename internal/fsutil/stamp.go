package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Stamp identifies a file and its last change as stat(2) reports them: the
// device and inode, the size and mode, and the modification and
// status-change times in nanoseconds. Replacing the file (a rename onto its
// path) changes the inode, as long as the replaced file is still open
// somewhere so that its inode cannot be reused; a write, truncation or
// chmod changes the size or the change time. Two changes that keep the
// size and fall within one tick of the file system's clock look the same:
// a reader that must not miss them compares the content when the change
// time is that close to when it read (see Changed).
type Stamp struct {
	dev, ino     uint64
	size         int64
	mode         uint32 // as the platform reports it: compared, not read
	regular      bool
	mtime, ctime int64
	// fi is kept where there is no inode number in the stamp (not
	// Linux), for os.SameFile.
	fi fs.FileInfo
}

// Same reports whether two stamps describe the same file, unchanged.
func (s Stamp) Same(o Stamp) bool {
	if s.dev != o.dev || s.ino != o.ino || s.size != o.size || s.mode != o.mode || s.regular != o.regular || s.mtime != o.mtime || s.ctime != o.ctime {
		return false
	}
	if s.fi == nil || o.fi == nil {
		return s.fi == nil && o.fi == nil
	}
	return os.SameFile(s.fi, o.fi)
}

// SameFile reports whether two stamps are of the same file (device and
// inode), changed or not.
func (s Stamp) SameFile(o Stamp) bool {
	if s.fi == nil || o.fi == nil {
		return s.fi == nil && o.fi == nil && s.dev == o.dev && s.ino == o.ino
	}
	return os.SameFile(s.fi, o.fi)
}

// Size is the file's size in bytes.
func (s Stamp) Size() int64 { return s.size }

// Regular reports whether the file is a regular file.
func (s Stamp) Regular() bool { return s.regular }

// Changed is when the file last changed: its status-change time, which
// the kernel sets from its own clock on every change (the modification
// time where there is none).
func (s Stamp) Changed() time.Time { return time.Unix(0, s.ctime) }

// ErrNULInPath is returned for a path that contains a NUL byte, which no
// file name can.
var ErrNULInPath = errors.New("path contains a NUL byte")

// StatPath stats one path, following symbolic links. On Linux amd64 and
// arm64 Stat does not allocate, so that it can run on every decision.
type StatPath struct {
	path  string
	cpath []byte // path and a NUL, for the system call
}

// NewStatPath prepares to stat path.
func NewStatPath(path string) (*StatPath, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: ErrNULInPath}
	}
	return &StatPath{path: path, cpath: append([]byte(path), 0)}, nil
}

// Path is the path as given.
func (p *StatPath) Path() string { return p.path }

// Stat fills s with the stamp of the file at the path now. Errors are
// *fs.PathError, and a missing file matches fs.ErrNotExist.
func (p *StatPath) Stat(s *Stamp) error { return p.stat(s) }
