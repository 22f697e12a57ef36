package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisset"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// endedCopy is the durable copy of an ended-delegation set that a machine
// keeps in its state directory: every ending its proxies read from the set
// or wrote to it. Proxies of several workspaces share it (one per set and
// machine); each write merges under a lock, so that none drops another's
// entries.
//
// The file is one JSON object, {"ended": {KEY: STATUS, ...}}, written
// whole (a temporary file renamed over it); a file that is not one is
// refused, not read as empty.
type endedCopy struct {
	path string
	// makeDir makes the copy's directory when it is missing (the state
	// directory: budget.MakeStateDir, which checks what it makes); nil
	// is os.MkdirAll, 0700.
	makeDir func(dir string) error

	mu     sync.Mutex
	copied map[string]bool // fields in the file (or pending)
	// err is the first write that failed: read without mu, so that a
	// decision never waits on a write.
	err atomic.Pointer[error]
	// opening: the set is being read for the first time; the entries read
	// meanwhile, pending, are written in one write before Open returns.
	opening bool
	pending map[string]string
}

// endedCopyFile is the form of the file.
type endedCopyFile struct {
	Ended map[string]string `json:"ended"`
}

// maxEndedCopy bounds the file read: a set holds at most
// redisset.MaxEntries entries of under 100 bytes each.
const maxEndedCopy = 128 << 20

// loadEndedCopy reads the copy at path: every entry, each checked as one
// read from Redis. A missing file is an empty copy.
func loadEndedCopy(path string) (map[string]string, error) {
	b, err := readEndedCopy(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return map[string]string{}, nil
	case err != nil:
		return nil, err
	}
	return parseEndedCopy(path, b)
}

// parseEndedCopy reads the bytes of the copy at path.
func parseEndedCopy(path string, b []byte) (map[string]string, error) {
	var f endedCopyFile
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%s is not a copy of an ended-delegation set (not a JSON object)", path)
	}
	if err := strictjson.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s is not a copy of an ended-delegation set: %v", path, err)
	}
	if f.Ended == nil {
		return nil, fmt.Errorf("%s is not a copy of an ended-delegation set: no \"ended\" object", path)
	}
	if len(f.Ended) > redisset.MaxEntries {
		return nil, fmt.Errorf("%s holds %d entries, over the limit of %d", path, len(f.Ended), redisset.MaxEntries)
	}
	for k, v := range f.Ended {
		if err := checkEnded(k, v); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return f.Ended, nil
}

func readEndedCopy(path string) ([]byte, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxEndedCopy {
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d for a copy of an ended-delegation set", path, fi.Size(), maxEndedCopy)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// write writes entries to the file, merged with what it holds, under the
// file's lock.
func (c *endedCopy) write(entries map[string]string) error {
	var err error
	if c.makeDir != nil {
		err = c.makeDir(filepath.Dir(c.path))
	} else {
		err = os.MkdirAll(filepath.Dir(c.path), 0o700)
	}
	if err != nil {
		return err
	}
	unlock, err := fsutil.Lock(c.path+".lock", 0o600)
	if err != nil {
		return err
	}
	defer unlock()
	have, err := loadEndedCopy(c.path)
	if err != nil {
		return err
	}
	grew := false
	for k, v := range entries {
		if _, ok := have[k]; !ok {
			have[k] = v
			grew = true
		}
	}
	if !grew {
		return nil
	}
	b, err := json.Marshal(endedCopyFile{Ended: have})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(c.path, append(b, '\n'), 0o600)
}

// keep records entries in the file unless it holds them: at once, or,
// while opening, with the others read meanwhile.
func (c *endedCopy) keep(entries map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := map[string]string{}
	for k, v := range entries {
		if !c.copied[k] {
			fresh[k] = v
		}
	}
	if len(fresh) == 0 {
		return c.Err()
	}
	if c.opening {
		maps.Copy(c.pending, fresh)
		for k := range fresh {
			c.copied[k] = true
		}
		return nil
	}
	if err := c.write(fresh); err != nil {
		return c.failed(err)
	}
	for k := range fresh {
		c.copied[k] = true
	}
	return c.Err()
}

// opened writes what was read while opening, and ends the opening.
func (c *endedCopy) opened() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opening = false
	if len(c.pending) > 0 {
		if err := c.write(c.pending); err != nil {
			c.failed(err)
		}
		c.pending = nil
	}
	return c.Err()
}

// failed records a write that failed; c.mu is held.
func (c *endedCopy) failed(err error) error {
	err = fmt.Errorf("the durable copy of the ended-delegation set, %s, cannot be written: %w; the set is only as durable as Redis", c.path, err)
	c.err.CompareAndSwap(nil, &err)
	return c.Err()
}

// Err is nil while every entry is in the file.
func (c *endedCopy) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}
