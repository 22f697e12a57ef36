package revocation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redisset"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// The Redis form of a list: one hash, from "REVOCATION_ID REVOKED_BY" to
// the signed entry as JSON, and a channel on which every entry added is
// announced (by its field) in the same script that adds it.
const (
	redisHash    = redisconn.Prefix + "revocations"
	redisChannel = redisconn.Prefix + "revocations"
)

// Live is a revocation list that a long-running process decides on: a
// File, or a Redis list.
type Live interface {
	// Revoked implements dct.Revocations with the newest list.
	Revoked(blockIDs, signers []string) (revocationID string, revoked bool, err error)
	// Reload reads the list again now, so that an entry this process has
	// just added is in force when it returns.
	Reload() error
	// Err is nil when the list can be decided on, else why not.
	Err() error
	// List returns a copy of the list as it is now.
	List() *List
	Close() error
}

var (
	_ Live = (*File)(nil)
	_ Live = (*Redis)(nil)
)

// Redis is a revocation list kept in Redis and shared by a fleet of
// proxies: each keeps a copy, pushed to it by pub/sub as entries are
// added and read in full again whenever its subscription is (re)made.
// Every entry read from Redis is verified before it is kept. While the
// copy is not known to be current (Redis silent for a second, or a broken
// subscription not yet made again and re-read) Revoked returns an error
// matching redisconn.ErrUnavailable, which denies the token. It is safe
// for concurrent use.
type Redis struct {
	url  string
	c    redisconn.Client
	copy *redisset.Copy
	list *List

	restored atomic.Int64
	// copyPaths are the durable copies: the workspace's, the machine's.
	copyPaths []string
	mu        sync.Mutex
	copied    map[copyField]bool // fields in each durable copy (or pending)
	copyErr   error
	// opening: Open has not returned, and the entries read meanwhile,
	// pending, are written to each copy in one write before it does.
	opening bool
	pending map[string][]Entry
}

// copyField is an entry's field in one durable copy.
type copyField struct{ path, field string }

// OpenRedis opens the revocation list at a redis:// or rediss:// URL and
// waits up to a few seconds for its first read. An empty list is an empty
// hash: a Redis list needs no creating.
//
// The list is grow-only as the fleet sees it: the copy never drops an
// entry, and writes back every entry it holds that Redis lacks (see
// redisset.Options.WriteBack).
func OpenRedis(rawURL string) (*Redis, error) {
	return OpenRedisCopy(rawURL)
}

// OpenRedisCopy is OpenRedis with a durable copy of the list kept in the
// list file at copyPath (none when ""): its entries are verified and held
// before Redis is first read, and written back to Redis if it lacks them,
// so that a proxy restarted against a Redis that lost entries (FLUSHALL,
// a restart without persistence, a failover to a replica that had not
// received them) restores them before it decides on a token; every entry
// read from Redis is appended to it. It fails when the copy cannot be read
// or written, or the entries cannot be written back.
//
// Several copies (a workspace's and the machine's, in its state directory,
// which proxies of every workspace share) are each kept whole: an entry
// one holds and another lacks is written to the other.
func OpenRedisCopy(rawURL string, copyPaths ...string) (*Redis, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return nil, fmt.Errorf("revocation list: %w", err)
	}
	r := &Redis{url: redisconn.Redact(rawURL), c: c, list: NewList()}
	for _, p := range copyPaths {
		if p != "" {
			r.copyPaths = append(r.copyPaths, p)
		}
	}
	r.opening = len(r.copyPaths) > 0
	var seed map[string]string
	if len(r.copyPaths) > 0 {
		seed = map[string]string{}
		entries := map[string]Entry{}
		r.copied = map[copyField]bool{}
		r.pending = map[string][]Entry{}
		for _, p := range r.copyPaths {
			l, err := Load(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				l = NewList()
			case err != nil:
				c.Close()
				return nil, fmt.Errorf("the durable copy of the revocation list: %w", err)
			}
			for _, e := range l.Entries() {
				v, err := json.Marshal(e)
				if err != nil {
					c.Close()
					return nil, err
				}
				seed[redisField(e)] = string(v)
				entries[redisField(e)] = e
				r.copied[copyField{p, redisField(e)}] = true
			}
		}
		// What one copy holds and another lacks is written to it.
		for f, e := range entries {
			for _, p := range r.copyPaths {
				if !r.copied[copyField{p, f}] {
					r.pending[p] = append(r.pending[p], e)
					r.copied[copyField{p, f}] = true
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*redisconn.Timeout)
	err = redisconn.CheckPrimary(ctx, c, "revocation list "+r.url)
	cancel()
	if err != nil {
		c.Close()
		return nil, err
	}
	r.copy, err = redisset.Open(c, redisset.Options{
		What: "revocation list " + r.url, Hash: redisHash, Channel: redisChannel,
		Check: func(field, value string) error { _, err := parseRedisEntry(field, value); return err },
		OnAdd: func(field, value string) {
			if e, err := parseRedisEntry(field, value); err == nil {
				// In the durable copy before it is in force, so that a
				// token this process refuses is refused after a restart.
				r.keepCopy(field, e)
				r.list.add(e)
			}
		},
		Seed: seed, WriteBack: true,
		Restored: func(fields []string) { r.restored.Add(int64(len(fields))) },
	}, 3*redisconn.Timeout)
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := r.flushPending(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// flushPending writes the entries read while opening to the durable copy,
// in one write, and ends the opening.
func (r *Redis) flushPending() error {
	if len(r.copyPaths) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opening = false
	for _, p := range r.copyPaths {
		if len(r.pending[p]) > 0 {
			if err := appendFile(p, r.pending[p]...); err != nil && r.copyErr == nil {
				r.copyErr = fmt.Errorf("the durable copy of the revocation list, %s, cannot be written: %w", p, err)
			}
		}
	}
	r.pending = nil
	return r.copyErr
}

// keepCopy appends an entry to each durable copy, unless it is there.
func (r *Redis) keepCopy(field string, e Entry) {
	if len(r.copyPaths) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.copyPaths {
		if r.copied[copyField{p, field}] {
			continue
		}
		if r.opening {
			// Written in one go before Open returns.
			r.pending[p] = append(r.pending[p], e)
			r.copied[copyField{p, field}] = true
			continue
		}
		if err := appendFile(p, e); err != nil {
			if r.copyErr == nil {
				r.copyErr = fmt.Errorf("the durable copy of the revocation list, %s, cannot be written: %w", p, err)
			}
			continue
		}
		r.copied[copyField{p, field}] = true
	}
}

func (r *Redis) copyError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.copyErr
}

// Restored returns how many entries this process has written back to a
// Redis that had lost them.
func (r *Redis) Restored() int64 { return r.restored.Load() }

// redisField is the hash field of an entry: one entry per block and
// revoker, as Append keeps.
func redisField(e Entry) string { return e.RevocationID + " " + e.RevokedBy }

// parseRedisEntry reads and verifies an entry as Redis holds it: strict
// JSON of one entry, with a valid signature, under its own field.
func parseRedisEntry(field, value string) (Entry, error) {
	var e Entry
	if len(value) > maxRedisEntry {
		return e, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrMalformedEntry, len(value), maxRedisEntry)
	}
	if t := bytes.TrimLeft([]byte(value), jsonSpace); len(t) == 0 || t[0] != '{' {
		return e, fmt.Errorf("%w: not a JSON object", ErrMalformedEntry)
	}
	if err := strictjson.Unmarshal([]byte(value), &e); err != nil {
		return e, fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	if err := e.Verify(); err != nil {
		return e, err
	}
	if field != redisField(e) {
		return e, fmt.Errorf("%w: stored under %q, not under its revocation ID and revoker", ErrMalformedEntry, clip(field))
	}
	return e, nil
}

// maxRedisEntry bounds one entry read from Redis: a signed entry is about
// 300 bytes.
const maxRedisEntry = 4 << 10

// Revoked implements dct.Revocations with the copy as it is now.
func (r *Redis) Revoked(blockIDs, signers []string) (string, bool, error) {
	if r == nil {
		return "", false, errors.New("no revocation list (nil *revocation.Redis)")
	}
	if err := r.Err(); err != nil {
		return "", false, err
	}
	return r.list.Revoked(blockIDs, signers)
}

// Reload implements Live: it reads the whole list from Redis.
func (r *Redis) Reload() error { return r.copy.Reload() }

// Err implements Live. A durable copy that cannot be written is an error
// too: the list is then only as durable as Redis.
func (r *Redis) Err() error {
	if err := r.copyError(); err != nil {
		return err
	}
	return r.copy.Err()
}

// List implements Live.
func (r *Redis) List() *List { return r.list.clone() }

// Close stops following the list and closes the connections.
func (r *Redis) Close() error {
	r.copy.Close()
	return r.c.Close()
}

// Open opens the list a policy names: a redis:// or rediss:// URL
// (OpenRedis), or else a file (OpenFile).
func Open(pathOrURL string) (Live, error) {
	if redisconn.IsURL(pathOrURL) {
		r, err := OpenRedis(pathOrURL)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	f, err := OpenFile(pathOrURL)
	if err != nil {
		return nil, err // not a nil *File in a non-nil interface
	}
	return f, nil
}

// appendRedis adds a verified entry to the Redis list at rawURL and
// announces it to every proxy following it. With replicas > 0 it then
// waits (WAIT, on the connection that wrote, up to a few seconds) until
// that many replicas of the list's primary have the entry, and fails if
// fewer do.
func appendRedis(rawURL string, e Entry, replicas int) error {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return fmt.Errorf("revocation list: %w", err)
	}
	defer c.Close()
	value, err := json.Marshal(e)
	if err != nil {
		return err
	}
	what := "revocation list " + redisconn.Redact(rawURL)
	ctx, cancel := context.WithTimeout(context.Background(), 3*redisconn.Timeout+waitReplicas)
	defer cancel()
	if err := redisconn.CheckPrimary(ctx, c, what); err != nil {
		return err
	}
	if replicas <= 0 {
		_, err = redisset.Add(ctx, c, redisHash, redisChannel, redisField(e), string(value), what)
		return err
	}
	// WAIT counts the writes of its own connection: the entry is written
	// and waited for on one connection to the list's primary.
	node, err := redisconn.NodeFor(ctx, c, redisHash)
	if err != nil {
		return redisconn.Unavailable(what, err)
	}
	conn := node.Conn()
	defer conn.Close()
	if _, err := redisset.Add(ctx, conn, redisHash, redisChannel, redisField(e), string(value), what); err != nil {
		return err
	}
	n, err := conn.Wait(ctx, replicas, waitReplicas).Result()
	if err != nil {
		return redisconn.Unavailable(what, err)
	}
	if n < int64(replicas) {
		return &redisconn.UnavailableError{What: what, Err: fmt.Errorf("the entry is written, but only %d of the %d replicas asked for acknowledged it within %v; it is not durable as asked", n, replicas, waitReplicas)}
	}
	return nil
}

// waitReplicas bounds how long appendRedis waits for replicas.
const waitReplicas = 5 * time.Second

// loadRedis reads and verifies the whole Redis list at rawURL.
func loadRedis(rawURL string) (*List, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return nil, fmt.Errorf("revocation list: %w", err)
	}
	defer c.Close()
	what := "revocation list " + redisconn.Redact(rawURL)
	ctx, cancel := context.WithTimeout(context.Background(), 3*redisconn.Timeout)
	defer cancel()
	all, err := c.HGetAll(ctx, redisHash).Result()
	if err != nil {
		return nil, redisconn.Unavailable(what, err)
	}
	if len(all) > redisset.MaxEntries {
		return nil, fmt.Errorf("%s holds %d entries, over the limit of %d", what, len(all), redisset.MaxEntries)
	}
	l := NewList()
	// In a fixed order, so that the same list reads the same.
	fields := make([]string, 0, len(all))
	for f := range all {
		fields = append(fields, f)
	}
	sortEntriesByTime(fields, all)
	for _, f := range fields {
		e, err := parseRedisEntry(f, all[f])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		l.add(e)
	}
	return l, nil
}

// sortEntriesByTime orders fields by their entries' revokedAt, then by
// field: the order they were most likely added in.
func sortEntriesByTime(fields []string, all map[string]string) {
	at := func(f string) string {
		var e struct {
			RevokedAt string `json:"revokedAt"`
		}
		json.Unmarshal([]byte(all[f]), &e)
		if t, err := time.Parse(time.RFC3339Nano, e.RevokedAt); err == nil {
			return t.UTC().Format("2006-01-02T15:04:05.000000000")
		}
		return e.RevokedAt
	}
	keys := make(map[string]string, len(fields))
	for _, f := range fields {
		keys[f] = at(f)
	}
	slices.SortFunc(fields, func(a, b string) int {
		if c := strings.Compare(keys[a], keys[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}
