package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// A Store admits calls within named limits: a *Limiter, which keeps the
// logs in this process (and maybe a file), or a *Redis, which keeps them
// in Redis for every process that opens the same URL.
type Store interface {
	// Reserve admits a call at every key, or at none; see
	// Limiter.Reserve.
	Reserve(keys []Key, now time.Time) (Admission, error)
	// Release gives back the slots of an admission Reserve returned.
	Release(a Admission) error
}

var (
	_ Store = (*Limiter)(nil)
	_ Store = (*Redis)(nil)
)

// Redis is a Store kept in a Redis server, shared by every process that
// opens the same URL: each Reserve, and each Release, is one script the
// server runs atomically, so that two processes can never both take the
// last slot of a key. Times are the server's (TIME), in microseconds, so
// that processes whose clocks disagree count the same windows. See the
// package documentation for the keys it writes.
type Redis struct {
	url    string // redacted, for messages
	c      redisconn.Client
	limits map[string]Limit
	closed atomic.Bool
	// callerClock, set by tests only, puts the time given to Reserve in
	// place of the server's clock, so that tests can step time.
	callerClock bool
}

// The keys of a Redis store. A key's log is a list under rateKeyPrefix,
// then, as for a spend store, the Redis Cluster hash tag of its level's
// issuer in braces (so that every log of a delegation tree is on one
// shard and a call's script touches one shard), a colon, the limit name's
// length in bytes, a colon, the limit name, a colon, the limit's N, a
// slash, its window in microseconds, a colon and the level: the length
// makes the split between name and level unambiguous whatever either
// holds. The rate is part of the key since proxies sharing a Redis may
// give one name different rates (a policy being rolled out, or two
// policies for one issuer's tokens): a log is trimmed to its N and lives
// as long as its window, so a log shared with a lenient rate would be cut
// short under a strict one. Each rate counts its own calls.
//
// A list, newest first, is the log itself: LPUSH adds the newest time,
// LTRIM keeps the last N, and LINDEX N-1 is the N-th most recent, each
// O(1) at the head or bounded by N, and stored compactly (Redis keeps
// small integers in a list as integers). A sorted set would do the same
// at several times the memory, and a counter cannot tell when a window
// frees. PEXPIRE drops a log once its newest time leaves its window, when
// an empty log would decide the same.
const rateKeyPrefix = redisconn.Prefix + "rate:"

// stampKey returns the key of the stamp of the delegation tree of level
// (the budget package's, which these scripts read and mark).
func stampKey(level string) string {
	return redisconn.Prefix + "stamp:{" + redisconn.HashTag(level) + "}"
}

// LostError is a call refused because the store lost a rate-limit window
// that held calls: an error matching redisconn.ErrReset (store_reset).
type LostError struct{ Store, Key string }

func (e *LostError) Error() string {
	return fmt.Sprintf("rate-limit store %s has lost data: the window %s is gone while it held calls (deleted or evicted); the delegation tree's calls are refused until an operator rebuilds it from the fleet's audit logs ('delegateos store recover --store URL --root ID --audit LOG... --policy FILE') or accepts the loss ('delegateos store init --store URL --reset --root ID')", e.Store, e.Key)
}

// Is makes errors.Is(err, redisconn.ErrReset) hold.
func (e *LostError) Is(target error) bool { return target == redisconn.ErrReset }

// redisKey returns the Redis key of k's log under the limit lim.
func redisKey(k Key, lim Limit) string {
	return rateKeyPrefix + "{" + redisconn.HashTag(k.Level) + "}:" + strconv.Itoa(len(k.Limit)) + ":" + k.Limit + ":" +
		strconv.Itoa(lim.N) + "/" + strconv.FormatInt(int64(windowMicros(lim)), 10) + ":" + k.Level
}

// windowMicros is lim's window in whole microseconds, rounded up.
func windowMicros(lim Limit) time.Duration {
	return (lim.Per + time.Microsecond - 1) / time.Microsecond
}

// luaTime is shared by the scripts: time reads a log's entry at index i,
// or nil, and fails the script (and the call with it) when the entry is
// not a time the scripts write.
const luaTime = `
local function time(k, i)
  local v = redis.call('LINDEX', k, i)
  if not v then return nil end
  if #v > 16 or not string.match(v, '^[1-9]%d*$') then
    error({err = 'ERR the rate-limit log ' .. k .. ' holds ' .. string.format('%q', v) .. ', not a time the scripts write'})
  end
  return tonumber(v)
end
`

// reserveScript admits a call at every key of KEYS (the distinct keys'
// logs) or at none. ARGV[1] is the time in microseconds, or "" for the
// server's clock (TIME: Redis 7 replicates a script's effects, so a
// replica gets the time the primary took); then each key's N and window
// in microseconds. The admission's time t is the later of now and one
// microsecond after the newest time at any of the keys, so that times
// are strictly increasing at each key (Release finds its own by value)
// even if the server's clock steps back; Lua's numbers are doubles, exact
// to 2^53, and a time in microseconds since 1970 is about 2^51. It
// returns {1, t}, or {0, i, wait} for the key i (from 1) whose wait in
// microseconds is the longest.
//
// The last key of KEYS is the delegation tree's stamp (see the budget
// package): each admission records there, in a field "r:KEY", when each
// log it wrote leaves its window; a log that is gone before then was lost
// (deleted, evicted, a partial restore), and the call is refused, the
// stamp marked lost ({2, i}, i the key), rather than admitted on a window
// that forgot its calls.
var reserveScript = redis.NewScript(luaTime + `
local now = tonumber(ARGV[1])
if not now then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end
local stamp = KEYS[#KEYS]
local nkeys = #KEYS - 1
for i = 1, nkeys do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    local until_ = tonumber(redis.call('HGET', stamp, 'r:' .. KEYS[i]) or '0') or 0
    -- A second's slack: the log's expiry, in milliseconds from the
    -- server's cached clock, may come a little before its window ends.
    if until_ > now + 1000000 then
      redis.call('HSETNX', stamp, 'reset', 'the rate-limit window ' .. KEYS[i] .. ' is gone while it held calls (deleted or evicted)')
      return {2, i}
    end
  end
end
local t = now
for i = 1, nkeys do
  local newest = time(KEYS[i], 0)
  if newest and newest >= t then t = newest + 1 end
end
local worst, wi = 0, 0
for i = 1, nkeys do
  local n, per = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local nth = time(KEYS[i], n - 1)
  if nth and nth + per - t > worst then worst, wi = nth + per - t, i end
end
if wi > 0 then return {0, wi, worst} end
local at = string.format('%d', t)
for i = 1, nkeys do
  local n, per = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  redis.call('LPUSH', KEYS[i], at)
  redis.call('LTRIM', KEYS[i], 0, n - 1)
  redis.call('PEXPIRE', KEYS[i], math.ceil((t + per - now) / 1000))
  if redis.call('EXISTS', stamp) == 1 then
    redis.call('HSET', stamp, 'r:' .. KEYS[i], string.format('%d', t + per))
  end
end
return {1, t}
`)

// releaseScript takes the time ARGV[1] out of each log of KEYS, and
// returns how many held it.
// The last key of KEYS is the tree's stamp: a log the release empties
// (Redis deletes it) is no longer expected there.
var releaseScript = redis.NewScript(`
local n, stamp = 0, KEYS[#KEYS]
for i = 1, #KEYS - 1 do
  n = n + redis.call('LREM', KEYS[i], 1, ARGV[1])
  if redis.call('EXISTS', KEYS[i]) == 0 then redis.call('HDEL', stamp, 'r:' .. KEYS[i]) end
end
return n
`)

// OpenRedis returns a Store kept in Redis at a redis:// or rediss:// URL
// (see redisconn.Options for its parameters), with the limits named in
// limits. It checks that the server answers and loads the scripts.
func OpenRedis(rawURL string, limits map[string]Limit) (*Redis, error) {
	own, err := ownLimits(limits)
	if err != nil {
		return nil, err
	}
	// A Reserve is not retried: the script may have run when its reply
	// timed out, and would take its slots twice.
	c, err := redisconn.OpenOnce(rawURL)
	if err != nil {
		return nil, fmt.Errorf("rate-limit store: %w", err)
	}
	r := &Redis{url: redisconn.Redact(rawURL), c: c, limits: own}
	for _, sc := range []*redis.Script{reserveScript, releaseScript} {
		if err := sc.Load(context.Background(), c).Err(); err != nil {
			c.Close()
			return nil, r.fail(err)
		}
	}
	return r, nil
}

// fail names the store in an error of a command: an error matching
// redisconn.ErrUnavailable when Redis did not answer.
func (r *Redis) fail(err error) error {
	return redisconn.Unavailable("rate-limit store "+r.url, err)
}

// Reserve admits a call at every key, or at none, at the Redis server's
// time: now is not used. It refuses as Limiter.Reserve does, and with an
// error matching redisconn.ErrUnavailable when Redis does not answer in
// time; then the script may have run all the same, and the slots it took
// stay taken until they leave their windows (the limits only get
// stricter).
func (r *Redis) Reserve(keys []Key, now time.Time) (Admission, error) {
	if len(keys) == 0 {
		return Admission{}, nil
	}
	if err := checkKeys(r.limits, keys); err != nil {
		return Admission{}, err
	}
	if r.closed.Load() {
		return Admission{}, errors.New("ratelimit: the limiter is closed")
	}
	distinct := make([]Key, 0, len(keys))
	for i, k := range keys {
		if !repeated(keys, i) {
			distinct = append(distinct, k)
		}
	}
	rkeys := make([]string, len(distinct))
	args := make([]any, 1, 1+2*len(distinct))
	args[0] = ""
	if r.callerClock {
		args[0] = now.UnixMicro()
	}
	for i, k := range distinct {
		lim := r.limits[k.Limit]
		rkeys[i] = redisKey(k, lim)
		args = append(args, lim.N, windowMicros(lim))
	}
	rkeys = append(rkeys, stampKey(distinct[0].Level))
	res, err := reserveScript.Run(context.Background(), r.c, rkeys, args...).Int64Slice()
	if err != nil {
		return Admission{}, r.fail(err)
	}
	switch {
	case len(res) == 2 && res[0] == 2 && res[1] >= 1 && res[1] <= int64(len(distinct)):
		return Admission{}, &LostError{Store: r.url, Key: rkeys[res[1]-1]}
	case len(res) == 2 && res[0] == 1 && res[1] > 0:
		return Admission{keys: keys, at: res[1], released: new(atomic.Bool)}, nil
	case len(res) == 3 && res[0] == 0 && res[1] >= 1 && res[1] <= int64(len(distinct)) && res[2] > 0:
		k := distinct[res[1]-1]
		return Admission{}, &LimitedError{Key: k, Limit: r.limits[k.Limit], RetryAfter: time.Duration(res[2]) * time.Microsecond}
	}
	return Admission{}, fmt.Errorf("rate-limit store %s: the reservation script replied %v, not a reply it makes", r.url, res)
}

// Release gives back the slots a holds, in one script run. Releasing an
// admission again, or its zero value, does nothing. When Redis does not
// answer, the slots stay taken until they leave their windows; a later
// Release of the same admission tries again.
func (r *Redis) Release(a Admission) error {
	if a.at == 0 || a.released == nil || a.released.Swap(true) {
		return nil
	}
	if r.closed.Load() {
		a.released.Store(false)
		return errors.New("ratelimit: the limiter is closed")
	}
	rkeys := make([]string, 0, len(a.keys))
	for i, k := range a.keys {
		if !repeated(a.keys, i) {
			rkeys = append(rkeys, redisKey(k, r.limits[k.Limit]))
		}
	}
	rkeys = append(rkeys, stampKey(a.keys[0].Level))
	if err := releaseScript.Run(context.Background(), r.c, rkeys, a.at).Err(); err != nil {
		a.released.Store(false)
		return r.fail(err)
	}
	return nil
}

// Close closes the connections; the logs stay in Redis. A closed Redis
// refuses every call. Closing twice does nothing.
func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.c.Close()
}
