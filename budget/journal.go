package budget

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// commitCmd is a run of commitScript: a commit at Actual of reservation
// RID (its KEYS Keys, its cost Cost), or, with Void, the cancelling of a
// reservation whose Reserve got no reply. Either may be sent any number
// of times: the script ends a reservation once.
type commitCmd struct {
	Keys   []string `json:"keys"`
	RID    string   `json:"rid"`
	Cost   int64    `json:"cost"`
	Actual int64    `json:"actual"`
	Void   bool     `json:"void,omitempty"`
}

func (c *commitCmd) run(ctx context.Context, r redis.Scripter) error {
	void, ttl := "", int64(0)
	if c.Void {
		void, ttl = "void", voidTTL.Milliseconds()
	}
	return commitScript.Run(ctx, r, c.Keys, c.RID, c.Cost, c.Actual, void, ttl).Err()
}

// valid reports whether a journalled command is one this package writes:
// a journal is the proxy's own file, but a torn or edited one must not
// make the scripts run on keys they do not own, or on keys of two trees.
func (c *commitCmd) valid() bool {
	if len(c.Keys) < 3 || c.RID == "" || c.Cost < 0 || c.Actual < 0 {
		return false
	}
	tag := tagOf(c.Keys[0])
	for i, k := range c.Keys {
		switch {
		case tagOf(k) != tag || !strings.Contains(k, "{"+tag+"}"):
			return false
		case i < len(c.Keys)-2 && !strings.HasPrefix(k, spendKeyPrefix),
			i == len(c.Keys)-2 && !strings.HasPrefix(k, openKeyPrefix),
			i == len(c.Keys)-1 && !strings.HasPrefix(k, voidKeyPrefix):
			return false
		}
	}
	return true
}

// journalPattern matches the journals of the store in a state directory,
// those a proxy claimed by renaming them (.sending-NONCE, an older
// version) included.
//
// Journals are named by the store's canonical address (so that a proxy
// naming the store another way, the default database left out, finds
// them); legacyJournalPattern matches those an earlier version named by
// the URL as written.
// Both are names in s.stateDir (for fsutil.GlobIn: its path is not a
// pattern).
func (s *Redis) journalPattern() string {
	return redisconn.CanonicalStateName(s.rawURL, ".unsent-*")
}

func (s *Redis) legacyJournalPattern() string {
	return stateName(s.rawURL, ".unsent-*")
}

// journalPath is this store's own journal.
func (s *Redis) journalPath() string {
	return filepath.Join(s.stateDir, redisconn.CanonicalStateName(s.rawURL, ".unsent-"+s.nonce+".json"))
}

// writeJournal writes the commits and cancellations being retried (and,
// at Close, the queued commits at the reserved cost) to this store's own
// journal, before they are first tried and each time one gets through:
// what a crash (kill -9, power loss) leaves unsent is sent by the next
// store opened on the state directory. The journal is locked (flock) for
// the store's life, one command per line, written in place and synced.
func (s *Redis) writeJournal(closing bool) {
	if s.stateDir == "" {
		return
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.mu.Lock()
	var cmds []commitCmd
	for c := range s.unsent {
		cmds = append(cmds, *c)
	}
	s.mu.Unlock()
	if closing {
		s.smu.Lock()
		for _, c := range s.settle {
			cmds = append(cmds, commitCmd{Keys: c.keys, RID: c.rid, Cost: c.cost, Actual: c.cost})
		}
		s.settle = nil
		s.smu.Unlock()
	}
	if s.jf == nil {
		if len(cmds) == 0 {
			return
		}
		if MakeStateDir(s.stateDir) != nil {
			return
		}
		f, err := openLocked(s.journalPath(), true)
		if err != nil {
			return
		}
		s.jf = f
	}
	var b []byte
	for _, c := range cmds {
		line, _ := json.Marshal(c)
		b = append(append(b, line...), '\n')
	}
	if s.jf.Truncate(0) == nil {
		s.jf.WriteAt(b, 0)
		s.jf.Sync()
	}
	if closing {
		if len(cmds) == 0 {
			os.Remove(s.journalPath())
		}
		s.jf.Close()
		s.jf = nil
	}
}

// readJournal reads a journal: one command per line (a torn last line is
// skipped), or the JSON array an older version wrote.
func readJournal(b []byte) []commitCmd {
	var cmds []commitCmd
	if json.Unmarshal(b, &cmds) == nil {
		return cmds
	}
	cmds = nil
	for _, line := range strings.Split(string(b), "\n") {
		var c commitCmd
		if json.Unmarshal([]byte(line), &c) == nil {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// replay sends the journals that stores before this one left in the
// state directory, those of crashed proxies included: each is claimed
// with its lock (a live proxy holds its own), sent, and removed. What
// does not get through is retried, and so first written to this store's
// own journal.
func (s *Redis) replay() {
	if s.stateDir == "" {
		return
	}
	// A directory that cannot be listed here cannot be written either:
	// the store's other uses of it say so.
	paths, _ := fsutil.GlobIn(s.stateDir, s.journalPattern())
	legacy, _ := fsutil.GlobIn(s.stateDir, s.legacyJournalPattern())
	for _, path := range append(paths, legacy...) {
		if strings.HasSuffix(path, ".tmp") || path == s.journalPath() {
			continue
		}
		f, b, err := openJournal(path)
		if err != nil {
			continue // another proxy's, or not a journal (a FIFO, a link)
		}
		// Removed (sent) by another proxy between the glob and the lock?
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 != nil || err2 != nil || !os.SameFile(fi, pi) {
			f.Close()
			continue
		}
		for _, c := range readJournal(b) {
			if !c.valid() {
				continue
			}
			if c.run(s.ctx, s.c) != nil {
				s.retry(c)
			}
		}
		os.Remove(path)
		f.Close()
	}
}
