package budget

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"
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

// journalGlob matches the journals of the store in a state directory.
func (s *Redis) journalGlob() string {
	return filepath.Join(s.stateDir, stateName(s.rawURL, ".unsent-*.json"))
}

// journal writes what Close could not send (retried commits and
// cancellations, queued commits at the reserved cost) to this store's own
// journal in the state directory.
func (s *Redis) journal() {
	s.mu.Lock()
	var cmds []commitCmd
	for c := range s.unsent {
		cmds = append(cmds, *c)
	}
	s.mu.Unlock()
	s.smu.Lock()
	for _, c := range s.settle {
		cmds = append(cmds, commitCmd{Keys: c.keys, RID: c.rid, Cost: c.cost, Actual: c.cost})
	}
	s.settle = nil
	s.smu.Unlock()
	if len(cmds) == 0 || s.stateDir == "" {
		return
	}
	if err := os.MkdirAll(s.stateDir, 0o700); err != nil {
		return
	}
	b, _ := json.Marshal(cmds)
	path := filepath.Join(s.stateDir, stateName(s.rawURL, ".unsent-"+s.nonce+".json"))
	tmp := path + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		os.Rename(tmp, path)
	}
}

// replay sends the journals that stores closed before this one left in
// the state directory, claiming each first (a rename), so that two
// proxies starting together do not both take one; what does not get
// through is journalled again at this store's Close.
func (s *Redis) replay() {
	if s.stateDir == "" {
		return
	}
	paths, _ := filepath.Glob(s.journalGlob())
	for _, path := range paths {
		claimed := path + ".sending-" + s.nonce
		if os.Rename(path, claimed) != nil {
			continue
		}
		b, err := os.ReadFile(claimed)
		var cmds []commitCmd
		if err == nil && json.Unmarshal(b, &cmds) == nil {
			for _, c := range cmds {
				if !c.valid() {
					continue
				}
				if c.run(s.ctx, s.c) != nil {
					s.retry(c)
				}
			}
		}
		os.Remove(claimed)
	}
}
