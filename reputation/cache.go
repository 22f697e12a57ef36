package reputation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// profileCache keeps the profiles Trust has parsed, so that the proxy's
// trust gate does not parse a large profile on every delegation. An entry
// is used only while the file is the one it was read from: same file
// (device and inode), size and modification time. Every write renames a
// new file into place or appends to the profile's signal log, whose stat
// is part of the key, so any write invalidates it.
type profileCache struct {
	mu sync.Mutex
	m  map[string]cacheEntry
}

type cacheEntry struct {
	fi  fs.FileInfo
	log fs.FileInfo // the signal log's; nil when there was none
	p   *Profile    // without its signals; never modified
	// attesters is positiveAttesters of the profile with its signals.
	attesters []string
}

// cachedProfile is a profileLoader for Trust: the profile it returns has
// its identity and stored scores but not its signals, which would make
// the cache as large as the workspace.
func (w *Workspace) cachedProfile(slug string, _ []byte) (*loadedProfile, error) {
	path := w.path(ProfilesDir, slug)
	// The file is looked at before it is read: if a writer replaces it in
	// between, the entry describes the older file and is refreshed on the
	// next call; it can never describe a newer file than it holds.
	fi, err := os.Lstat(path)
	if err != nil {
		w.cache.drop(slug)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, ErrNotFound)
		}
		return nil, err
	}
	logFi, err := os.Lstat(w.logPath(slug))
	if errors.Is(err, fs.ErrNotExist) {
		logFi, err = nil, nil
	}
	if err != nil {
		w.cache.drop(slug)
		return nil, err
	}
	if e, ok := w.cache.get(slug, fi, logFi); ok {
		return &loadedProfile{p: e.p, attesters: e.attesters}, nil
	}
	lp, err := w.loadProfile(slug, nil)
	if err != nil {
		w.cache.drop(slug)
		return nil, err
	}
	p := *lp.p
	attesters := positiveAttesters(&p)
	p.Signals = nil
	w.cache.put(slug, cacheEntry{fi: fi, log: logFi, p: &p, attesters: attesters})
	return &loadedProfile{p: &p, attesters: attesters}, nil
}

func (c *profileCache) get(slug string, fi, logFi fs.FileInfo) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[slug]
	if !ok || !sameStat(e.fi, fi) || (e.log == nil) != (logFi == nil) || e.log != nil && !sameStat(e.log, logFi) {
		return cacheEntry{}, false
	}
	return e, true
}

// sameStat reports whether two looks at a path saw the same file, size
// and modification time.
func sameStat(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func (c *profileCache) put(slug string, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cacheEntry)
	}
	c.m[slug] = e
}

func (c *profileCache) drop(slug string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, slug)
}
