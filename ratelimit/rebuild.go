package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// RebuildRedis writes into the Redis store at rawURL the admissions a
// recovery found (the times of each key's admitted calls, from the
// fleet's audit logs), as Reserve would have logged them, for a store
// that lost its logs: only the times still in their window by the
// server's clock, merged with what the store still holds, newest first,
// strictly decreasing, at most N, expiring with the newest. It returns
// how many logs it wrote. A key whose limit limits does not name is an
// error.
func RebuildRedis(rawURL string, limits map[string]Limit, admitted map[Key][]time.Time) (int, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return 0, fmt.Errorf("rate-limit store: %w", err)
	}
	defer c.Close()
	ctx := context.Background()
	fail := func(err error) (int, error) {
		return 0, redisconn.Unavailable("rate-limit store "+redisconn.Redact(rawURL), err)
	}
	tm, err := c.Time(ctx).Result()
	if err != nil {
		return fail(err)
	}
	now := tm.UnixMicro()
	written := 0
	for k, times := range admitted {
		if err := checkKey(k); err != nil {
			return written, err
		}
		lim, ok := limits[k.Limit]
		if !ok {
			return written, fmt.Errorf("ratelimit: no limit %q", k.Limit)
		}
		per := int64(windowMicros(lim))
		rk := redisKey(k, lim)
		have, err := c.LRange(ctx, rk, 0, -1).Result()
		if err != nil {
			return fail(err)
		}
		var us []int64
		for _, h := range have {
			v, err := strconv.ParseInt(h, 10, 64)
			if err != nil || v <= 0 {
				return written, fmt.Errorf("the rate-limit log %s holds %q, not a time the scripts write", rk, h)
			}
			us = append(us, v)
		}
		for _, t := range times {
			us = append(us, t.UnixMicro())
		}
		slices.Sort(us)
		slices.Reverse(us)
		var keep []any
		last := int64(0)
		for _, v := range us {
			if len(keep) > 0 && v >= last {
				v = last - 1 // strictly decreasing: Release finds a time by value
			}
			if v <= now-per || len(keep) == lim.N {
				break
			}
			keep = append(keep, strconv.FormatInt(v, 10))
			last = v
		}
		if len(keep) == 0 {
			continue
		}
		newest, _ := strconv.ParseInt(keep[0].(string), 10, 64)
		_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, rk)
			p.RPush(ctx, rk, keep...)
			p.PExpire(ctx, rk, time.Duration(max((newest+per-now+999)/1000, 1))*time.Millisecond)
			return nil
		})
		if err != nil {
			return fail(err)
		}
		written++
	}
	return written, nil
}
