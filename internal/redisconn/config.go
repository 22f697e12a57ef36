package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrEviction is matched (errors.Is) by the error of CheckConfig for a
// server that may evict keys: it would drop a budget's spend, a rate
// window or a revocation to make room, and the fleet would go on as if
// nothing had been spent or revoked.
var ErrEviction = errors.New("the Redis server may evict keys")

// CheckConfig reads the settings of the server behind c that decide
// whether it can keep what the stores write (CONFIG GET): it returns an
// error matching ErrEviction when its maxmemory-policy is not noeviction,
// and warnings naming the risk of what it cannot check (CONFIG disabled
// or renamed) or of persistence that is off (no append-only file and no
// RDB save): a restart of that server forgets every budget's spend. what
// names the store in messages.
func CheckConfig(ctx context.Context, c redis.Cmdable, what string) (warnings []string, err error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return checkNodeConfig(ctx, c, what)
	}
	// Every primary of a cluster holds some trees: each is checked.
	var mu sync.Mutex
	err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		w, err := checkNodeConfig(ctx, n, what+" (node "+n.Options().Addr+")")
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, w...)
		return err
	})
	return warnings, err
}

// ErrReplica is matched (errors.Is) by the error of CheckPrimary (and
// so of CheckConfig) for a server that replicates another.
var ErrReplica = errors.New("the Redis server is a replica")

// CheckPrimary refuses a server that is a replica of another (INFO
// replication): a
// writable replica (replica-read-only no) would take a proxy's
// reservations and revocations and never pass them to its primary, where
// the rest of the fleet spends and reads, and its primary's writes would
// overwrite them; a read-only one refuses every write. A cluster client
// writes to the primaries only and is not checked. A server that refuses
// INFO (an ACL user without it) is not checked either.
func CheckPrimary(ctx context.Context, c redis.Cmdable, what string) error {
	if _, ok := c.(*redis.ClusterClient); ok {
		return nil
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return nil
		}
		return Unavailable(what, err)
	}
	field := func(name string) string {
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
				return v
			}
		}
		return ""
	}
	if role := field("role"); role == "" || role == "master" {
		return nil
	}
	return fmt.Errorf("%w: %s is a replica of %s:%s: what the proxy writes there never reaches its primary, where the rest of the fleet spends and reads; name the primary", ErrReplica, what, field("master_host"), field("master_port"))
}

func checkNodeConfig(ctx context.Context, c redis.Cmdable, what string) (warnings []string, err error) {
	if err := CheckPrimary(ctx, c, what); err != nil {
		return nil, err
	}
	get := func(name string) (string, error) {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", err
		}
		v, ok := m[name]
		if !ok {
			return "", fmt.Errorf("CONFIG GET %s returned no value", name)
		}
		return v, nil
	}
	policy, err := get("maxmemory-policy")
	if err != nil {
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			return nil, Unavailable(what, err)
		}
		// CONFIG is disabled or renamed (a managed Redis): nothing can be
		// checked, so the operator is told what must hold.
		return []string{fmt.Sprintf("%s: the eviction policy and persistence cannot be verified (CONFIG GET: %v): make sure maxmemory-policy is noeviction and the append-only file is on (appendonly yes, appendfsync always), or a reset of the store can let budgets be spent again", what, err)}, nil
	}
	if policy != "noeviction" {
		return nil, fmt.Errorf("%w: %s has maxmemory-policy %s, so it may drop a budget's spend or a revocation to make room and the fleet would spend it again; set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)", ErrEviction, what, policy)
	}
	aof, err1 := get("appendonly")
	save, err2 := get("save")
	switch {
	case err1 != nil || err2 != nil:
		warnings = append(warnings, fmt.Sprintf("%s: whether it persists its data cannot be verified (CONFIG GET: %v): a restart without persistence forgets every budget's spend", what, errors.Join(err1, err2)))
	case aof != "yes" && strings.TrimSpace(save) == "":
		warnings = append(warnings, fmt.Sprintf("%s has persistence off (appendonly no, no save): a restart of Redis forgets every budget's spend, rate window and revocation, and the proxies refuse calls (store_reset) until an operator runs 'delegateos store recover'; set appendonly yes and appendfsync always", what))
	case aof != "yes":
		warnings = append(warnings, fmt.Sprintf("%s persists only by RDB snapshots (save %q, appendonly no): a restart loses what was spent since the last snapshot; set appendonly yes and appendfsync always", what, save))
	}
	return warnings, nil
}
