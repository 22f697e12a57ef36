package budget

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// readRedisUsage reads every key of the Redis spend store at rawURL.
func readRedisUsage(rawURL string) ([]Usage, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return nil, fmt.Errorf("spend store: %w", err)
	}
	defer c.Close()
	// A store that has lost data does not show its spend as if it were
	// what was spent.
	id, err := readIdentity(context.Background(), c)
	if err != nil {
		return nil, redisconn.Unavailable("spend store "+redisconn.Redact(rawURL), err)
	}
	if id != nil && id.Reset != "" {
		return nil, &ResetError{Store: redisconn.Redact(rawURL), Reason: id.Reset}
	}
	// Nor one whose trees are still marked lost (another root's recovery
	// lifted the rest).
	lost, err := resetTrees(context.Background(), c)
	if err != nil {
		return nil, redisconn.Unavailable("spend store "+redisconn.Redact(rawURL), err)
	}
	if len(lost) > 0 {
		return nil, &ResetError{Store: redisconn.Redact(rawURL), Reason: "its delegation trees " + strings.Join(lost, ", ") + " are still marked lost"}
	}
	us, err := redisUsage(context.Background(), c)
	if err != nil {
		return nil, redisconn.Unavailable("spend store "+redisconn.Redact(rawURL), err)
	}
	return us, nil
}

// resetTrees returns the trees ({TAG}) whose stamps are marked reset (on
// every primary of a cluster).
func resetTrees(ctx context.Context, c redisconn.Client) ([]string, error) {
	var out []string
	err := redisconn.Scan(ctx, c, stampKeyPrefix+"*", func(keys []string) error {
		if len(keys) == 0 {
			return nil
		}
		cmds := make([]*redis.BoolCmd, len(keys))
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				cmds[i] = p.HExists(ctx, k, "reset")
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i, k := range keys {
			if cmds[i].Val() {
				out = append(out, "{"+tagOf(k)+"}")
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// redisUsage scans the spend hashes (SCAN on every primary of a
// cluster, so the server is not blocked
// however many keys it holds) and reads each, a batch of keys per round
// trip. A hash that does not read as one the scripts write is an error
// naming it.
func redisUsage(ctx context.Context, c redisconn.Client) ([]Usage, error) {
	var out []Usage
	err := redisconn.Scan(ctx, c, spendKeyPrefix+"*", func(names []string) error {
		cmds := make([]*redis.SliceCmd, len(names))
		if len(names) > 0 {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, n := range names {
					cmds[i] = p.HMGet(ctx, n, "c", "h", "n", "t", "l")
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		for i, n := range names {
			key, ok := budgetKeyOf(n)
			if !ok {
				return fmt.Errorf("the key %q is not one a spend store writes", n)
			}
			u, err := parseUsageFields(key, cmds[i].Val())
			if err != nil {
				return fmt.Errorf("the key %q: %w", n, err)
			}
			if u.Committed != 0 || u.Reserved != 0 || u.Recorded {
				out = append(out, u)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// SCAN may return a key twice.
	slices.SortFunc(out, func(a, b Usage) int { return strings.Compare(a.Key, b.Key) })
	out = slices.CompactFunc(out, func(a, b Usage) bool { return a.Key == b.Key })
	return out, nil
}

// parseUsageFields reads the fields c, h, n, t and l of a key's spend hash
// (nil where missing) into its usage: each must be a decimal the scripts
// write, the time at most the end of the year 9999, and a key with calls
// must have a time.
func parseUsageFields(key string, vals []any) (Usage, error) {
	u := Usage{Key: key}
	if len(vals) != 5 {
		return u, fmt.Errorf("%d fields read, not 5", len(vals))
	}
	var n [5]int64
	for i, v := range vals {
		if v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return u, fmt.Errorf("field %d is %T, not a string", i, v)
		}
		d, err := parseDecimal(s)
		if err != nil {
			return u, err
		}
		n[i] = d
	}
	if n[3] > maxAt {
		return u, fmt.Errorf("the time of the last call, %d, is past the year 9999", n[3])
	}
	if _, ok := addChecked(n[0], n[1]); !ok {
		return u, fmt.Errorf("the spend of %q passes %d", key, maxInt64)
	}
	u.Committed, u.Reserved, u.Calls = n[0], n[1], n[2]
	if n[2] > 0 {
		if n[3] == 0 {
			return u, fmt.Errorf("%d calls without the time of the last", n[2])
		}
		u.Recorded, u.LastCall, u.Limit = true, time.UnixMilli(n[3]).UTC(), n[4]
	}
	return u, nil
}

const maxInt64 = 1<<63 - 1
