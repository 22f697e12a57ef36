package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// WatchEvery is how often a store's eviction watch (Eviction.Run) reads
// its server's eviction state, off the calls' path, as a Redis copy pings
// (redisset's pingEvery).
const WatchEvery = 250 * time.Millisecond

// An Eviction watches, while a store runs, what the start's CheckConfig
// checked once: that its Redis evicts nothing. Each Poll reads, per
// server (each primary of a cluster), INFO's run_id and evicted_keys and
// CONFIG GET maxmemory-policy. A policy other than noeviction makes Err
// fail (matching ErrEviction and ErrUnavailable) until a poll finds it
// back; an evicted_keys past what the last poll of the same run of the
// server saw is reported by Poll as an eviction, which the store treats
// as a loss of its data (any key may be the store's). A server whose
// run_id changed restarted (its counter starts at zero): what it lost is
// for the store's own history to find; a server first seen (a new
// primary after a failover, a cluster's new node) is counted from then.
// A server that refuses INFO or CONFIG (an ACL user without them, a
// managed Redis) is not watched on that count: Unverifiable says so.
type Eviction struct {
	c    redis.Cmdable
	what string

	mu       sync.Mutex
	nodes    map[string]evictNode // by address
	policy   string               // the first unsafe policy seen by the last poll, or ""
	noInfo   bool
	noConfig bool
}

type evictNode struct {
	runID   string
	evicted int64
}

// WatchEviction returns the watch of c's eviction state, with what it
// reads now as its start (an error when the server did not answer).
func WatchEviction(ctx context.Context, c redis.Cmdable, what string) (*Eviction, error) {
	e := &Eviction{c: c, what: what, nodes: map[string]evictNode{}}
	if _, err := e.Poll(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// Unverifiable returns a warning for the start when the server refuses
// what the watch reads (INFO or CONFIG), else "".
func (e *Eviction) Unverifiable() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.noInfo && e.noConfig:
		return fmt.Sprintf("%s: a change of its eviction policy while the proxy runs, and the keys Redis evicts, cannot be watched (INFO and CONFIG are refused): keep maxmemory-policy noeviction", e.what)
	case e.noInfo:
		return fmt.Sprintf("%s: the keys Redis evicts cannot be watched (INFO is refused); its eviction policy is watched", e.what)
	case e.noConfig:
		return fmt.Sprintf("%s: a change of its eviction policy while the proxy runs cannot be watched (CONFIG is refused); the keys it evicts are (INFO stats)", e.what)
	}
	return ""
}

// Err returns an error matching ErrEviction and ErrUnavailable while the
// last poll found a policy that may evict, else nil (nil for a nil
// watch). A load from memory.
func (e *Eviction) Err() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	p := e.policy
	e.mu.Unlock()
	if p == "" {
		return nil
	}
	return &UnavailableError{What: e.what, Err: fmt.Errorf("%w: its maxmemory-policy is now %s (changed since the start), so it may drop what the fleet wrote; calls are refused until it is noeviction again (CONFIG SET maxmemory-policy noeviction)", ErrEviction, p)}
}

// Poll reads the server's eviction state once. evicted describes the
// keys the server evicted since the previous poll ("" when none); err is
// set when a server did not answer (the state is then left as it was).
func (e *Eviction) Poll(ctx context.Context) (evicted string, err error) {
	type result struct {
		addr, runID, policy string
		evicted             int64
		noInfo, noConfig    bool
	}
	var mu sync.Mutex
	var rs []result
	read := func(ctx context.Context, n redis.Cmdable, addr string) error {
		r := result{addr: addr}
		info, err := n.Info(ctx, "server").Result()
		if err == nil {
			r.runID = infoField(info, "run_id")
			var stats string
			if stats, err = n.Info(ctx, "stats").Result(); err == nil {
				r.evicted, _ = strconv.ParseInt(infoField(stats, "evicted_keys"), 10, 64)
			}
		}
		if err != nil {
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				return err
			}
			r.noInfo = true
		}
		m, err := n.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				return err
			}
			r.noConfig = true
		} else {
			r.policy = m["maxmemory-policy"]
		}
		mu.Lock()
		rs = append(rs, r)
		mu.Unlock()
		return nil
	}
	if cc, ok := e.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return read(ctx, n, n.Options().Addr)
		})
	} else {
		err = read(ctx, e.c, "")
	}
	if err != nil {
		return "", Unavailable(e.what, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.policy, e.noInfo, e.noConfig = "", false, false
	var moved []string
	for _, r := range rs {
		e.noInfo = e.noInfo || r.noInfo
		e.noConfig = e.noConfig || r.noConfig
		if r.policy != "" && r.policy != "noeviction" && e.policy == "" {
			e.policy = r.policy
		}
		if r.noInfo {
			continue
		}
		old, seen := e.nodes[r.addr]
		if seen && old.runID == r.runID && r.evicted > old.evicted {
			where := ""
			if r.addr != "" {
				where = " (node " + r.addr + ")"
			}
			moved = append(moved, fmt.Sprintf("%d%s", r.evicted-old.evicted, where))
		}
		e.nodes[r.addr] = evictNode{runID: r.runID, evicted: r.evicted}
	}
	if len(moved) > 0 {
		evicted = fmt.Sprintf("Redis evicted keys (evicted_keys grew by %s) while the proxy ran: its maxmemory-policy was changed from noeviction, and what the fleet wrote may be gone", strings.Join(moved, ", "))
	}
	return evicted, nil
}

// infoField returns the value of name in an INFO reply, or "".
func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return ""
}
