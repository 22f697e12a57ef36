//go:build !unix

package budget

import (
	"errors"
	"os"
)

// liveRecords says live records are kept: not without mmap and flock, where
// a proxy killed within a second of its last raises loses them (see
// live.go).
const liveRecords = false

func isLocked(error) bool { return false }

type liveRecord struct {
	id   string
	gen  int64
	path string
}

func openLive(path, tmp, id string, gen int64, machine, instance string) (*liveRecord, error) {
	return nil, errors.ErrUnsupported
}

func (l *liveRecord) raise(string, int64) error { return nil }
func (l *liveRecord) close(bool)                { _ = os.Remove }
func (l *liveRecord) whole() bool               { return true }

func openRecord(string, bool) (*os.File, []byte, error) { return nil, nil, errors.ErrUnsupported }

// maxStateFile bounds what is read of a journal (see live_unix.go).
const maxStateFile = 256 << 20

func readStateFile(path string) ([]byte, error) { return os.ReadFile(path) }
