package chain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redisset"
)

// The Redis form of an ended-delegation set: one hash from delegation key
// to the status it ended with, and a channel on which every ending is
// announced (by its key) in the same script that records it. A set written
// before keys existed holds delegation IDs: such an entry is still read,
// and ends every delegation with that ID (see Shared.StatusByID).
const (
	endedHash    = redisconn.Prefix + "ended"
	endedChannel = redisconn.Prefix + "ended"
)

// Shared is a Store whose endings are shared by a fleet of proxies through
// a set in Redis: a delegation completed, failed or revoked at one proxy
// (in its own Store, its workspace's log) is recorded in the set, and
// every proxy's Status reports it ended within a second. Each proxy keeps
// a copy of the set, pushed to it by pub/sub and read in full again
// whenever its subscription is (re)made; while the copy is not known to be
// current, Status returns an error matching redisconn.ErrUnavailable. It
// is safe for concurrent use.
type Shared struct {
	Store
	url     string
	c       redisconn.Client
	copy    *redisset.Copy
	durable *endedCopy // nil without a durable copy
}

var _ StatusReader = (*Shared)(nil)

// OpenShared shares the endings of local through the set at a redis:// or
// rediss:// URL. Closing the Shared closes local.
func OpenShared(local Store, rawURL string) (*Shared, error) {
	return OpenSharedCopy(local, rawURL, "", nil)
}

// OpenSharedCopy is OpenShared with a durable copy of the set kept in the
// file at copyPath (none when ""), which the proxies of a machine share
// (see StateCopyName): its entries are checked and held before Redis is
// first read, and written back to Redis if it lacks them, so that a proxy
// started against a set that lost endings while no proxy that knew them
// ran (FLUSHALL, a restart without persistence, a failover to a replica
// that had not received them) restores them before it decides on a
// delegation; every ending read from Redis, or shared by this proxy, is
// added to it. It fails when the copy cannot be read or written, or its
// entries cannot be written back; a copy that cannot be written later
// makes Status fail. makeDir makes the copy's directory when it is
// missing (nil: os.MkdirAll, 0700).
func OpenSharedCopy(local Store, rawURL, copyPath string, makeDir func(dir string) error) (*Shared, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return nil, fmt.Errorf("ended delegations: %w", err)
	}
	s := &Shared{Store: local, url: redisconn.Redact(rawURL), c: c}
	ctx, cancel := context.WithTimeout(context.Background(), 3*redisconn.Timeout)
	err = redisconn.CheckPrimary(ctx, c, "ended delegations "+s.url)
	cancel()
	if err != nil {
		c.Close()
		return nil, err
	}
	var seed map[string]string
	if copyPath != "" {
		seed, err = loadEndedCopy(copyPath)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("the durable copy of the ended-delegation set: %w", err)
		}
		s.durable = &endedCopy{path: copyPath, makeDir: makeDir, copied: map[string]bool{}, opening: true, pending: map[string]string{}}
		for k := range seed {
			s.durable.copied[k] = true
		}
		// The machine's other copies (an earlier version's, named by the
		// URL as written; one written under another name of the server,
		// localhost or its address, behind NAT or an alias, which no
		// canonical name links): their entries are held and written to
		// this one. An ending is a fact of its delegation, so taking one
		// from another set only refuses more (fail closed).
		others, err := fsutil.GlobIn(filepath.Dir(copyPath), "redis-*.ended.json")
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("the durable copy of the ended-delegation set: the directory %s cannot be listed: %w", filepath.Dir(copyPath), err)
		}
		for _, other := range others {
			if other == copyPath {
				continue
			}
			old, err := loadEndedCopy(other)
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("the durable copy of the ended-delegation set: %w", err)
			}
			for k, v := range old {
				if _, ok := seed[k]; !ok {
					seed[k] = v
					s.durable.pending[k] = v
					s.durable.copied[k] = true
				}
			}
		}
	}
	s.copy, err = redisset.Open(c, redisset.Options{
		What: "ended-delegation set " + s.url, Hash: endedHash, Channel: endedChannel,
		Check: checkEnded,
		// In the durable copy before it is in force, as a revocation is.
		OnAdd: func(field, value string) {
			if s.durable != nil {
				s.durable.keep(map[string]string{field: value})
			}
		},
		Seed: seed,
		// Grow-only: an ending this proxy knows and the set lost (a
		// FLUSHALL, a restart without persistence, a failover to a
		// replica that had not received it) is written back.
		WriteBack: true,
	}, 3*redisconn.Timeout)
	if err != nil {
		c.Close()
		return nil, err
	}
	if s.durable != nil {
		if err := s.durable.opened(); err != nil {
			s.copy.Close()
			c.Close()
			return nil, err
		}
	}
	return s, nil
}

// StateCopyName is the file name, in a state directory, of the durable
// copy of the ended-delegation set at rawURL: named by the store's
// canonical address (redisconn.Address), so that every spelling of the
// URL (localhost or 127.0.0.1, the default database left out) names one
// copy; not its password or parameters.
func StateCopyName(rawURL string) string {
	return redisconn.CanonicalStateName(rawURL, ".ended.json")
}

// checkEnded checks an entry of the set: a delegation key (or, written
// before keys, a delegation ID) and a terminal status.
func checkEnded(id, status string) error {
	if !ValidKey(id) && !ValidDelegationID(id) {
		return fmt.Errorf("%q is not a delegation key", clip(id))
	}
	if !Status(status).Terminal() {
		return fmt.Errorf("delegation %s: %q is not a status a delegation ends with", id, clip(status))
	}
	return nil
}

// Status implements StatusReader: a delegation the local store records
// ended is ended; else one the set records ended is, with its status.
func (s *Shared) Status(key string) (Status, bool, error) {
	st, recorded, err := localStatus(s.Store, key)
	if err != nil || (recorded && st != StatusActive) {
		return st, recorded, err
	}
	if !ValidKey(key) {
		// The set holds keys, and IDs written before keys: an ID is
		// looked up with StatusByID.
		return st, recorded, nil
	}
	v, ok, err := s.get(key)
	if err != nil {
		return "", false, err
	}
	if ok {
		return Status(v), true, nil
	}
	return st, recorded, nil
}

// get reads the set's copy; an error also when the durable copy cannot be
// written (the set is then only as durable as Redis).
func (s *Shared) get(field string) (string, bool, error) {
	if s.durable != nil {
		if err := s.durable.Err(); err != nil {
			// Refused as the set's own failure is, with the cause.
			return "", false, &redisconn.UnavailableError{What: "ended-delegation set " + s.url, Err: err}
		}
	}
	return s.copy.Get(field)
}

// StatusByID reports an entry the set holds under a delegation ID, as a
// set written before delegation keys did: such an entry ends every
// delegation with that ID. New endings are recorded by key only, so
// nothing a proxy of this version records can end another's delegation
// that happens to share the ID. Remove the ID entries (HDEL) once every
// proxy of the fleet records keys; see the README on upgrading.
func (s *Shared) StatusByID(id string) (Status, bool, error) {
	if !ValidDelegationID(id) {
		return "", false, nil
	}
	v, ok, err := s.get(id)
	if err != nil {
		return "", false, err
	}
	if ok {
		return Status(v), true, nil
	}
	return "", false, nil
}

// localStatus asks a Store for a status by key, through StatusReader if it
// can.
func localStatus(st Store, key string) (Status, bool, error) {
	if r, ok := st.(StatusReader); ok {
		return r.Status(key)
	}
	if !ValidKey(key) {
		return "", false, nil
	}
	d, err := st.Get(key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return d.Status, true, nil
}

// Complete implements Store, and shares the ending by key.
func (s *Shared) Complete(ref, attestationID string, at time.Time) error {
	d, err := s.Store.Get(ref)
	if err != nil {
		return err
	}
	if err := s.Store.Complete(d.Key, attestationID, at); err != nil {
		return err
	}
	return s.share(StatusCompleted, d.Key)
}

// Fail implements Store, and shares the ending by key.
func (s *Shared) Fail(ref, attestationID string, at time.Time) error {
	d, err := s.Store.Get(ref)
	if err != nil {
		return err
	}
	if err := s.Store.Fail(d.Key, attestationID, at); err != nil {
		return err
	}
	return s.share(StatusFailed, d.Key)
}

// Revoke implements Store, and shares the ending of every delegation it
// changed.
func (s *Shared) Revoke(id string, at time.Time) ([]string, error) {
	changed, err := s.Store.Revoke(id, at)
	if err != nil {
		return changed, err
	}
	return changed, s.share(StatusRevoked, changed...)
}

// share records endings in the durable copy and the set. An error says
// that the ending is recorded here but not shared, or not kept by the
// machine.
func (s *Shared) share(st Status, ids ...string) error {
	var kept error
	if s.durable != nil && len(ids) > 0 {
		m := make(map[string]string, len(ids))
		for _, id := range ids {
			m[id] = string(st)
		}
		// Before the set: an ending the set loses before this proxy's copy
		// reads it back is still on the machine.
		kept = s.durable.keep(m)
	}
	// In this proxy's copy before the set: a FLUSHALL between the write
	// and the copy reading it back would otherwise leave the ending in no
	// running proxy's copy, so none would write it back.
	for _, id := range ids {
		kept = errors.Join(kept, s.copy.Hold(id, string(st)))
	}
	return errors.Join(shareEnded(s.c, s.url, st, ids...), kept)
}

func shareEnded(c redisconn.Client, url string, st Status, ids ...string) error {
	what := "ended-delegation set " + url
	ctx, cancel := context.WithTimeout(context.Background(), 3*redisconn.Timeout)
	defer cancel()
	for _, id := range ids {
		if _, err := redisset.Add(ctx, c, endedHash, endedChannel, id, string(st), what); err != nil {
			return fmt.Errorf("delegation %s is recorded %s here, but not in the %s: %w", id, st, what, err)
		}
	}
	return nil
}

// Close stops following the set and closes the local store.
func (s *Shared) Close() error {
	s.copy.Close()
	s.c.Close()
	return s.Store.Close()
}

// LoadEnded reads the ended-delegation set at a redis:// or rediss:// URL:
// each delegation key (or, for an entry written before keys, ID) with the
// status it ended with.
func LoadEnded(rawURL string) (map[string]Status, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return nil, fmt.Errorf("ended delegations: %w", err)
	}
	defer c.Close()
	what := "ended-delegation set " + redisconn.Redact(rawURL)
	ctx, cancel := context.WithTimeout(context.Background(), 3*redisconn.Timeout)
	defer cancel()
	all, err := c.HGetAll(ctx, endedHash).Result()
	if err != nil {
		return nil, redisconn.Unavailable(what, err)
	}
	out := make(map[string]Status, len(all))
	for id, st := range all {
		if err := checkEnded(id, st); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out[id] = Status(st)
	}
	return out, nil
}

// RepublishEnded records in the ended-delegation set at rawURL every
// delegation of ds that has ended (completed, failed or revoked), as the
// recovery of a set that lost data does, and returns how many it
// recorded. An entry the set holds already is left as it is. Endings are
// recorded by delegation key, never by ID: an ID entry would end every
// delegation with that ID (a sybil's under the victim's ID included), so a
// terminal record without a valid key is an error.
func RepublishEnded(rawURL string, ds []Delegation) (int, error) {
	for _, d := range ds {
		if d.Status.Terminal() && !ValidKey(d.Key) {
			return 0, fmt.Errorf("ended delegations: delegation %s (%s) has no valid delegation key: refusing to republish its ending by ID", d.ID, d.Status)
		}
	}
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return 0, fmt.Errorf("ended delegations: %w", err)
	}
	defer c.Close()
	n := 0
	for _, d := range ds {
		if !d.Status.Terminal() {
			continue
		}
		if err := shareEnded(c, redisconn.Redact(rawURL), d.Status, d.Key); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
