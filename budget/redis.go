package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// Redis is a Store kept in Redis, shared by every proxy that opens the same
// URL: each Reserve, Commit and Release is one script run by the server,
// atomically across every level, so that two proxies can never both spend
// the last microcent. See the package documentation for the keys it
// writes and what survives a crash.
type Redis struct {
	url string // redacted, for messages
	// rawURL names the store in the state directory, stateDir (none
	// when empty).
	rawURL, stateDir string
	c                redisconn.Client
	ctx              context.Context
	stop             context.CancelFunc
	// nonce makes this store's reservation IDs unique across the fleet.
	nonce string
	now   func() time.Time
	// warnings are OpenRedis's findings on the server's configuration.
	warnings []string

	pending sync.WaitGroup // commits and cancels retried in the background

	// settle holds the commits of reservations at their reserved cost,
	// which the flusher sends in batches (one round trip for many): such a
	// commit only moves the cost from held to committed, so until it
	// reaches Redis the cost counts the same. flushing says the flusher
	// runs.
	smu      sync.Mutex
	settle   []settleCmd
	flushing bool

	mu     sync.Mutex // guards l, last, closed, ident, resetReason and seen
	l      ledger     // open reservations only; spend is in Redis
	last   map[string]int64
	closed bool
	// ident is the store's identity and generation as this proxy knows
	// them; resetReason, when not empty, says why the store has lost data
	// (every Reserve is refused); seen is the count of calls this proxy
	// has seen each first key (a chain's root delegation) reach.
	ident       Identity
	resetReason string
	// treeReset says, per tree (its hash tag), why this proxy found it
	// lost data (its calls are refused; the other trees' are not).
	treeReset map[string]string
	seen      map[string]int64
	// own is, per first key, its count of calls at this proxy's latest
	// reservation, which the reservation also wrote in the key's field
	// "p:NONCE" (only this proxy writes it); mseen is the highest count
	// this machine's proxies saw there, which each of their reservations
	// raises the key's field "m:MACHINE" to (machine, the state
	// directory's own ID; none without one). A store gone back to an
	// older snapshot holds either field below what its proxy or machine
	// saw, whatever calls other proxies made since took the key's count
	// back up ("n", seen).
	own     map[string]int64
	mseen   map[string]int64
	machine string
	// instance is this host's instance of the machine, which each
	// reservation records in the key's field "i:MACHINE"; irank ranks
	// those the state directory ran as, and minst is, per first key, the
	// one that last raised its field from the state directory (see
	// machineInstance).
	instance string
	irank    map[string]int
	minst    map[string]string
	// live is this proxy's live record of the counts it raised, under
	// its identity and generation (liveOld those of earlier ones, kept
	// until the counts are written at Close; see live.go).
	live    *liveRecord
	liveOld []*liveRecord
	liveSeq int
	// epoch is the state directory's count of the writes of its counts
	// files, and epochSeen its value when this proxy last read them (see
	// epoch.go).
	epoch     *countsEpoch
	epochSeen uint64
	// epochErr and liveErr say the counts epoch or the live record was
	// cut while mapped and could not be mapped whole again: every
	// reservation is refused with it until it can (repairMaps). watchDone
	// is closed when the check of the mapped files (watchMaps) ends.
	epochErr  error
	liveErr   error
	watchDone chan struct{}
	// seenFile is the counts file as this proxy last read or wrote it
	// (nil: there was none), and checked when the check of the mapped
	// files last ran (see checkMaps).
	seenFile os.FileInfo
	// seenUnsure is set when a counts write was found made under a lock
	// file deleted or replaced meanwhile (an operator's rm of the state
	// directory's locks): another proxy may have written at once, so the
	// live record is kept at Close, folded by the next start.
	seenUnsure bool
	checked    time.Time
	// evict watches the server's eviction policy and evicted keys every
	// redisconn.WatchEvery, off the calls' path (watchEviction); a policy
	// that may evict refuses every reservation (store_unavailable), and
	// an eviction marks the store reset. evictDone is closed when the
	// watch returns.
	evict     *redisconn.Eviction
	evictDone chan struct{}
	listed    map[string]bool // trees this proxy has added to treesKey
	// seenSaved is when seen was last written to the state directory,
	// savingSeen that it is being written.
	seenSaved  time.Time
	savingSeen bool
	seenTimer  bool // a write of seen is due (seenGrew)
	// unsent are the commits and cancellations being retried, which are
	// written ahead to the journal jf (guarded by jmu).
	unsent map[*commitCmd]bool
	jmu    sync.Mutex
	jf     *os.File
}

var _ Store = (*Redis)(nil)

// The keys of a Redis spend store. A key's spend is a hash under
// spendKeyPrefix, then the hash tag of its issuer in braces, a colon and
// the key: committed ("c"), held ("h"), calls ("n"), the time of the last
// call in Unix milliseconds ("t") and the limit it gave ("l"). The open
// reservations of an issuer's keys are one hash, under openKeyPrefix and
// the tag, from reservation ID to held cost. A reservation cancelled
// before it was made (its Reserve got no reply in time) leaves a key under
// voidKeyPrefix, for voidTTL, so that the Reserve, if it reaches Redis
// late, does nothing. All carry the same tag, so a Redis Cluster keeps a
// delegation tree on one shard.
const (
	spendKeyPrefix = redisconn.Prefix + "spend:"
	openKeyPrefix  = redisconn.Prefix + "open:"
	voidKeyPrefix  = redisconn.Prefix + "void:"
	voidTTL        = 10 * time.Minute
)

// spendKey returns the Redis key of a budget key's spend.
func spendKey(key string) string {
	return spendKeyPrefix + "{" + redisconn.HashTag(key) + "}:" + key
}

// openKey returns the Redis key of the open reservations of a budget key's
// tree.
func openKey(key string) string {
	return openKeyPrefix + "{" + redisconn.HashTag(key) + "}"
}

// voidKey returns the Redis key that marks reservation rid of a budget
// key's tree cancelled.
func voidKey(key, rid string) string {
	return voidKeyPrefix + "{" + redisconn.HashTag(key) + "}:" + rid
}

// budgetKeyOf returns the budget key a spend key holds, and false if the
// Redis key is not one spendKey writes.
func budgetKeyOf(redisKey string) (string, bool) {
	rest, ok := strings.CutPrefix(redisKey, spendKeyPrefix+"{")
	if !ok {
		return "", false
	}
	tag, key, ok := strings.Cut(rest, "}:")
	if !ok || checkKey(key) != nil || redisconn.HashTag(key) != tag {
		return "", false
	}
	return key, true
}

// luaDecimal is shared by the scripts: exact arithmetic on the decimal
// strings Redis keeps, since Lua's numbers are doubles, exact only to
// 2^53, and spend and limits go to 2^63−1. Every value is a non-negative
// decimal without leading zeros; get refuses (the script fails, and the
// call with it) a stored value that is not one.
const luaDecimal = `
local MAX = '9223372036854775807'
local function cmp(a, b)
  if #a ~= #b then if #a < #b then return -1 end return 1 end
  if a == b then return 0 end
  if a < b then return -1 end
  return 1
end
local function add(a, b)
  local out, carry, i, j = {}, 0, #a, #b
  while i > 0 or j > 0 or carry > 0 do
    local d = carry
    if i > 0 then d = d + string.byte(a, i) - 48; i = i - 1 end
    if j > 0 then d = d + string.byte(b, j) - 48; j = j - 1 end
    out[#out + 1] = string.char(48 + d % 10)
    carry = math.floor(d / 10)
  end
  local s = string.reverse(table.concat(out)):gsub('^0+', '')
  if s == '' then return '0' end
  return s
end
local function sat(a) if cmp(a, MAX) > 0 then return MAX end return a end
local function valid(key, field, v)
  if v and v ~= '0' and not string.match(v, '^[1-9]%d*$') then
    error({err = 'ERR the field ' .. field .. ' of ' .. key .. ' is not a decimal the spend scripts write'})
  end
end
local function get(key, field)
  local v = redis.call('HGET', key, field)
  valid(key, field, v)
  return v or '0'
end
-- unhold drops cost from the held cost of key, never below zero: a held
-- cost a recovery lowered (to what the open reservations hold) is not
-- made negative by a reservation's late commit, which no script would
-- read again.
local function unhold(key, cost)
  if cmp(get(key, 'h'), cost) <= 0 then
    redis.call('HSET', key, 'h', '0')
  else
    redis.call('HINCRBY', key, 'h', '-' .. cost)
  end
end
local FIELDS = {'c', 'h', 'n', 't'}
local function fields(key)
  local vs = redis.call('HMGET', key, 'c', 'h', 'n', 't')
  for i = 1, 4 do valid(key, FIELDS[i], vs[i]); vs[i] = vs[i] or '0' end
  return vs
end
`

// reserveScript holds cost at every key or at none. KEYS are the distinct
// keys' spend hashes, then the open-reservations hash and the void key of
// the reservation, the tree's stamp, then the spend hashes of the commits
// it carries. The last ARGV are the store's identity and generation
// as the proxy knows them, the calls it has seen the first key count,
// "1" when the tree is known to be new (its stamp is then made), the
// proxy's nonce and count, its machine's ID and count, and its machine's
// instance and one taken over (see {9} below). ARGV:
// the reservation ID, cost, the time of the call, the number of levels and
// of keys, then per level the index of its key in KEYS and its limit, then
// per key the limit the call records, then the number of commits carried
// and for each its reservation ID, cost and number of keys, and the index
// of each key in KEYS. The commits carried (at their reserved cost, of
// reservations of the same tree) are made first, as commitScript makes
// them, whatever the reservation's fate: they share its round trip and its
// write to the append-only file. It returns {1} when the cost is held (or
// was held already by this ID: a retried command), {0, level, spent} for
// the first level, root first, that refuses, or {2} when the reservation
// was cancelled before it arrived; {1} is {1, n}, n the first key's
// count of calls (0 for a retried command). Before anything it checks the
// tree's stamp (see identityKey): {3, why} when the tree lost data (a
// spend key gone, fewer calls than the proxy saw, or a held cost while
// the tree's open-reservations hash is gone), {4}
// when it has no stamp and is not known to be new, {5} when its
// generation is after the proxy's, {6, why} when it is marked reset, {7}
// when its generation is before the proxy's, {8, why} when it was
// written under another identity, {9, instance} when the machine's
// field "i:MACHINE" names another instance than the last two ARGV (this
// host's instance of the machine, and one its state directory ran as,
// taken over; see machineInstance) while the proxy has a count of its
// machine's to check. Keys that exist without a "k:" field in the stamp
// (written before it) get one.
var reserveScript = redis.NewScript(luaDecimal + `
local nl, nk = tonumber(ARGV[4]), tonumber(ARGV[5])
local open = KEYS[nk + 1]
local rid, cost, at = ARGV[1], ARGV[2], ARGV[3]
local base = 6 + 2 * nl
local p = base + nk
-- The tree's stamp: the store's identity and generation it was written
-- under; and the calls of the first key, which must not be fewer than the
-- proxy has seen. Nothing is written before these checks.
local stamp, na = KEYS[nk + 3], #ARGV
local sid, sgen, lastn, fresh = ARGV[na - 9], tonumber(ARGV[na - 8]), tonumber(ARGV[na - 7]), ARGV[na - 6]
local pid, pown, mid, mown = ARGV[na - 5], tonumber(ARGV[na - 4]), ARGV[na - 3], tonumber(ARGV[na - 2])
local inst, from = ARGV[na - 1], ARGV[na]
local st = redis.call('HMGET', stamp, 'id', 'g', 'reset')
local newstamp = false
if st[3] then return {6, st[3]} end
if not st[1] then
  if lastn > 0 then return {3, 'the stamp of its delegation tree is gone, after ' .. lastn .. ' calls this proxy saw'} end
  if fresh ~= '1' then return {4} end
  newstamp = true
elseif st[1] ~= sid then
  return {8, 'its delegation tree was written under the identity ' .. st[1] .. ', not ' .. sid}
else
  local g = tonumber(st[2] or '0')
  if g > sgen then return {5} end
  if g < sgen then return {7} end
  if g == sgen and lastn > 0 then
    local n = redis.call('HGET', KEYS[1], 'n') or '0'
    if (tonumber(n) or 0) < lastn then
      return {3, KEYS[1] .. ' counts ' .. n .. ' calls, fewer than the ' .. lastn .. ' this proxy saw'}
    end
  end
  if g == sgen and pown > 0 then
    local v = redis.call('HGET', KEYS[1], 'p:' .. pid) or '0'
    if (tonumber(v) or 0) < pown then
      return {3, KEYS[1] .. ' records ' .. v .. ' calls at this proxy\'s latest reservation, not the ' .. pown .. ' it made: Redis went back to an older snapshot (other proxies\' calls since took its count back up)'}
    end
  end
  if g == sgen and mown > 0 and mid ~= '' then
    local v = redis.call('HGET', KEYS[1], 'm:' .. mid) or '0'
    if (tonumber(v) or 0) < mown then
      return {3, KEYS[1] .. ' records ' .. v .. ' calls at the latest reservation of this machine\'s proxies, fewer than the ' .. mown .. ' they saw: Redis went back to an older snapshot (other machines\' calls since took its count back up)'}
    end
    -- The machine's field is checked only if this host's instance of
    -- the machine (or one its state directory ran as: from) raised it
    -- last: another host using the same machine ID may have raised it.
    local h = redis.call('HGET', KEYS[1], 'i:' .. mid)
    if h and h ~= inst and h ~= from then return {9, h} end
  end
end
local isnew = {}
if redis.call('EXISTS', unpack(KEYS, 1, nk)) < nk then
  for i = 1, nk do
    if redis.call('EXISTS', KEYS[i]) == 0 then
      if not newstamp and redis.call('HEXISTS', stamp, 'k:' .. KEYS[i]) == 1 then
        return {3, 'the spend key ' .. KEYS[i] .. ' is gone'}
      end
      isnew[i] = true
    end
  end
end
-- Each spend key's calls at its last reservation are in the stamp
-- ("k:KEY"; "1" is the mark of a key from before, not checked): a key
-- counting fewer went back to an earlier state on its own (a RESTORE of
-- an old DUMP), which the first key's count does not show when it is
-- another level's.
for i = 1, nk do
  if not isnew[i] then
    local v = redis.call('HGET', stamp, 'k:' .. KEYS[i])
    if v and v ~= '1' then
      local n = redis.call('HGET', KEYS[i], 'n') or '0'
      if cmp(n, v) < 0 then
        return {3, KEYS[i] .. ' counts ' .. n .. ' calls, fewer than the ' .. v .. ' its tree\'s stamp recorded at its last reservation: the key went back to an earlier state'}
      end
    end
  end
end
-- Every held cost is a reservation's, open in the tree's open hash: held
-- cost with no open reservation means the hash was lost (deleted by
-- hand, evicted, a partial restore), and the commits of the reservations
-- it held would end nothing, their cost held for ever.
if redis.call('EXISTS', open) == 0 then
  for i = 1, nk do
    if not isnew[i] then
      local h = get(KEYS[i], 'h')
      if h ~= '0' then
        return {3, 'the open reservations of its delegation tree, ' .. open .. ', are gone while ' .. KEYS[i] .. ' holds ' .. h .. ' for them'}
      end
    end
  end
end
-- Keys written before the tree had a stamp (store migrate, a store from
-- before stamps) are marked as they are found, so that their loss is
-- seen too.
for i = 1, nk do
  if not isnew[i] then redis.call('HSETNX', stamp, 'k:' .. KEYS[i], '1') end
end
-- Each step is refused before it writes anything: Redis does not undo
-- the writes of a script that fails.
for i = nk + 4, #KEYS do fields(KEYS[i]) end
if newstamp then
  redis.call('HSET', stamp, 'id', sid, 'g', ARGV[na - 8])
end
local ns = tonumber(ARGV[p]); p = p + 1
for x = 1, ns do
  local srid, scost, sn = ARGV[p], ARGV[p + 1], tonumber(ARGV[p + 2])
  p = p + 3
  if redis.call('HDEL', open, srid) == 1 and scost ~= '0' then
    for y = 0, sn - 1 do
      local k = KEYS[tonumber(ARGV[p + y])]
      -- A key gone meanwhile is not made again (with a held cost below
      -- zero): its tree's stamp says it is gone.
      if redis.call('EXISTS', k) == 1 then
        unhold(k, scost)
        redis.call('HSET', k, 'c', sat(add(get(k, 'c'), scost)))
      end
    end
  end
  p = p + sn
end
if redis.call('EXISTS', KEYS[nk + 2]) == 1 then return {2} end
if redis.call('HEXISTS', open, rid) == 1 then return {1, 0} end
local f, spent = {}, {}
for i = 1, nk do f[i] = fields(KEYS[i]); spent[i] = add(f[i][1], f[i][2]) end
for j = 0, nl - 1 do
  local s, lim = spent[tonumber(ARGV[6 + 2 * j])], ARGV[7 + 2 * j]
  if cmp(s, lim) >= 0 or cmp(add(s, cost), lim) > 0 then return {0, j, s} end
end
for i = 1, nk do
  local k = KEYS[i]
  if cost ~= '0' then redis.call('HINCRBY', k, 'h', cost) end
  redis.call('HSET', k, 'n', sat(add(f[i][3], '1')))
  if tonumber(at) >= tonumber(f[i][4]) then
    redis.call('HSET', k, 't', at, 'l', ARGV[base + i - 1])
  end
end
redis.call('HSET', open, rid, cost)
for i = 1, nk do
  redis.call('HSET', stamp, 'k:' .. KEYS[i], sat(add(f[i][3], '1')))
end
local newn = sat(add(f[1][3], '1'))
redis.call('HSET', KEYS[1], 'p:' .. pid, newn)
if mid ~= '' then
  if cmp(redis.call('HGET', KEYS[1], 'm:' .. mid) or '0', newn) < 0 then
    redis.call('HSET', KEYS[1], 'm:' .. mid, newn)
  end
  if inst ~= '' and redis.call('HGET', KEYS[1], 'i:' .. mid) ~= inst then
    redis.call('HSET', KEYS[1], 'i:' .. mid, inst)
  end
end
return {1, tonumber(newn)}
`)

// commitScript ends a reservation: it drops the held cost (ARGV[2]) at
// every key and adds the actual cost (ARGV[3]) to what each has committed,
// saturating at 2^63−1. KEYS are as for reserveScript. It returns 1, or 0
// when the reservation is not open: a retried command that ran already,
// or a reservation that was never made, which ARGV[4] = "void" then marks
// cancelled for voidTTL (in milliseconds, ARGV[5]).
var commitScript = redis.NewScript(luaDecimal + `
local nk = #KEYS - 2
local open = KEYS[nk + 1]
local rid, cost, actual = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HEXISTS', open, rid) == 0 then
  if ARGV[4] == 'void' then redis.call('SET', KEYS[nk + 2], '1', 'PX', ARGV[5]) end
  return 0
end
-- Refused before anything is written: Redis does not undo the writes of
-- a script that fails.
for i = 1, nk do fields(KEYS[i]) end
redis.call('HDEL', open, rid)
for i = 1, nk do
  local k = KEYS[i]
  -- A key gone meanwhile is not made again (with a held cost below
  -- zero): its tree's stamp says it is gone.
  if redis.call('EXISTS', k) == 1 then
    if cost ~= '0' then unhold(k, cost) end
    if actual ~= '0' then redis.call('HSET', k, 'c', sat(add(get(k, 'c'), actual))) end
  end
end
return 1
`)

// OpenRedis returns the spend store at a redis:// or rediss:// URL (see
// redisconn.Options for its parameters). It checks that the server
// answers and loads the scripts.
func OpenRedis(rawURL string) (*Redis, error) {
	return OpenRedisIn(rawURL, "")
}

// OpenRedisIn is OpenRedis for a proxy that remembers the store's
// identity in stateDir (see StateDir), so that it finds, even after a
// restart, a store that has lost it. It joins the store's history (see
// identityKey): it creates its identity if the store is new, and is in
// the reset state (every Reserve refused, with an error matching
// redisconn.ErrReset) if the store has lost data.
func OpenRedisIn(rawURL, stateDir string) (*Redis, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return nil, fmt.Errorf("spend store: %w", err)
	}
	var nonce [12]byte
	rand.Read(nonce[:])
	ctx, stop := context.WithCancel(context.Background())
	s := &Redis{url: redisconn.Redact(rawURL), rawURL: rawURL, stateDir: stateDir, c: c, ctx: ctx, stop: stop, nonce: hex.EncodeToString(nonce[:]), now: time.Now}
	for _, sc := range []*redis.Script{reserveScript, commitScript, createIdentityScript, markResetScript} {
		if err := sc.Load(ctx, c).Err(); err != nil {
			c.Close()
			return nil, s.fail(err)
		}
	}
	warnings, err := redisconn.CheckConfig(ctx, c, "the spend store "+s.url)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.warnings = warnings
	if s.evict, err = redisconn.WatchEviction(ctx, c, "the spend store "+s.url); err != nil {
		c.Close()
		return nil, err
	}
	if w := s.evict.Unverifiable(); w != "" {
		s.warnings = append(s.warnings, w)
	}
	if stateDir != "" {
		if s.machine, err = machineID(stateDir); err != nil {
			c.Close()
			return nil, &StateError{fmt.Errorf("spend store %s: %w", s.url, err)}
		}
		if s.instance, s.irank, err = machineInstance(stateDir, s.machine); err != nil {
			c.Close()
			return nil, &StateError{fmt.Errorf("spend store %s: %w", s.url, err)}
		}
		if liveRecords {
			if s.epoch, err = openEpoch(stateDir); err != nil {
				c.Close()
				return nil, &StateError{fmt.Errorf("spend store %s: the counter of the writes of the state directory's counts files (%s) cannot be kept: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, filepath.Join(stateDir, epochFile), err)}
			}
		}
	}
	if err := s.join(ctx); err != nil {
		c.Close()
		if s.epoch != nil {
			s.epoch.close()
		}
		return nil, err
	}
	if stateDir != "" && liveRecords {
		s.mu.Lock()
		err := s.liveFor(s.ident)
		s.mu.Unlock()
		if err != nil {
			c.Close()
			s.epoch.close()
			return nil, &StateError{fmt.Errorf("spend store %s: the counts of calls this proxy sees cannot be recorded in the state directory %s (%v): a proxy killed within a second of its last calls would lose them; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, stateDir, err)}
		}
	}
	s.replay()
	s.evictDone = make(chan struct{})
	go s.watchEviction()
	if s.epoch != nil || s.live != nil {
		s.watchDone = make(chan struct{})
		s.checked = time.Now()
		go s.watchMaps()
	}
	return s, nil
}

// Warnings returns what OpenRedis found that puts the store's promise at
// risk without breaking it (persistence off, a configuration it could
// not read), for the proxy to log.
func (s *Redis) Warnings() []string { return s.warnings }

// fail names the store in an error of a command.
func (s *Redis) fail(err error) error {
	return redisconn.Unavailable("spend store "+s.url, err)
}

// Reserve implements Store with one script run: EVALSHA, or EVAL when the
// server has lost the script (a restart without it).
func (s *Redis) Reserve(levels []Level, cost int64) (*Reservation, error) {
	keys, err := checkReserve(levels, cost)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, s.errClosed()
	}
	s.l.lastID++
	r := &Reservation{owner: &s.l, id: s.l.lastID, keys: keys, cost: cost}
	broken := s.epochErr != nil || s.liveErr != nil
	stale := s.watchDone != nil && time.Since(s.checked) > 2*mapCheckEvery
	s.mu.Unlock()

	if stale {
		// The watcher did not run for a while (the process was stopped
		// or starved): what changed meanwhile is found before this call,
		// not after it (red team 9, RT9-2).
		s.checkMaps()
	}
	// The server's eviction policy as the watch last read it (a load from
	// memory): one that may evict refuses the call, store_unavailable.
	if err := s.evict.Err(); err != nil {
		return nil, err
	}
	if broken {
		if err := s.repairMaps(); err != nil {
			return nil, s.fail(err)
		}
	}
	if err := s.resetErr(); err != nil {
		return nil, err
	}
	tag := redisconn.HashTag(keys[0])
	if err := s.treeResetErr(tag); err != nil {
		return nil, err
	}
	var buf [MaxLevels]int64
	limits := keyLimits(buf[:len(keys)], levels, keys)
	rid := s.rid(r.id)
	rkeys := scriptKeys(keys, rid)
	at := min(max(s.now().UnixMilli(), 1), maxAt)
	fresh, listed, from := "0", false, ""
	var sent Identity // the identity and generation of the last run
	var res []any
	var settles []settleCmd
	for try := 0; ; try++ {
		args := make([]any, 0, 10+2*len(levels)+len(keys))
		args = append(args, rid, cost, at, len(levels), len(keys))
		for _, l := range levels {
			args = append(args, indexOf(keys, l.Key)+1, l.Limit)
		}
		for _, l := range limits {
			args = append(args, l)
		}
		settles = s.takeSettles(rkeys[len(keys)])
		args = append(args, len(settles))
		skeys := append(slices.Clip(rkeys), stampKey(keys[0]))
		for _, c := range settles {
			spend := c.keys[:len(c.keys)-2]
			args = append(args, c.rid, c.cost, len(spend))
			for _, k := range spend {
				skeys = append(skeys, k)
				args = append(args, len(skeys))
			}
		}
		s.mu.Lock()
		if moved, err := s.epochMoved(); moved || err != nil {
			// The machine's other proxies wrote their counts since (or
			// the epoch's file was cut: mapped whole again, then read).
			old := s.epoch
			s.mu.Unlock()
			if err != nil {
				if err := s.remapEpoch(old); err != nil {
					s.requeueSettles(settles)
					return nil, s.fail(err)
				}
			}
			s.syncMachine()
			s.mu.Lock()
		}
		id, seen, own, mseen, inst := s.ident, s.seen[keys[0]], s.own[keys[0]], s.mseen[keys[0]], s.instance
		s.mu.Unlock()
		sent = id
		args = append(args, id.ID, id.Gen, seen, fresh, s.nonce, own, s.machine, mseen, inst, from)
		res, err = reserveScript.Run(s.ctx, s.c, skeys, args...).Slice()
		if err != nil || len(res) == 0 {
			break
		}
		flag, _ := res[0].(int64)
		if flag < 3 {
			break
		}
		// The script wrote nothing: the commits it carried are sent again.
		s.requeueSettles(settles)
		if try >= 3 {
			return nil, s.fail(fmt.Errorf("the reservation script replied %v %d times", res, try+1))
		}
		var serr error
		switch flag {
		case 3:
			why, _ := res[len(res)-1].(string)
			serr = s.resetTree(tag, why)
		case 6:
			// The tree is marked reset: refused until an operator lifts
			// it, without marking the store (another root's recovery may
			// have lifted the rest).
			why, _ := res[len(res)-1].(string)
			return nil, &ResetError{Store: s.url, Reason: why, Root: tag}
		case 8:
			// The store's identity first: an operator may have acted
			// since this proxy's generation (a recovery or init --reset
			// that gave the tree's stamp the store's identity), which the
			// proxy adopts rather than mark the tree it just lifted.
			why, _ := res[len(res)-1].(string)
			if serr = s.storeChanged(tag); serr == nil {
				serr = s.resetStore(tag, why)
			}
		case 9:
			// The machine's field was raised last by another instance:
			// one this state directory ran as before (a reboot), or the
			// one of the directory now at its path (moved while this
			// proxy ran), is taken over; a copy's refuses the tree's
			// calls.
			h, _ := res[len(res)-1].(string)
			if err := s.takeOver(keys[0], tag, h); err != nil {
				return nil, err
			}
			from = h
		case 7:
			serr = s.stampBehind(tag, id)
		case 4:
			serr = s.newTree(tag, listed)
			fresh = "1"
			if errors.Is(serr, errListed) {
				serr, listed, fresh = nil, true, "0"
			}
		case 5:
			serr = s.refresh(s.ctx)
			if serr == nil {
				s.mu.Lock()
				behind := s.ident.Gen == id.Gen
				s.mu.Unlock()
				if behind && s.operatorActing(id.Gen) {
					// Restamped by an operator's store init --reset or
					// store recover, which writes the store's new
					// generation last: not a loss, but not decided on.
					return nil, &ResetError{Store: s.url, Reason: fmt.Sprintf("its delegation tree {%s} has been given a new generation by an operator (store init --reset or store recover), which has not yet written it to the store's identity; the call is refused until it has", tag)}
				}
				if behind {
					serr = s.resetNow(fmt.Sprintf("its delegation tree {%s} was written under a generation after this proxy's %d, which the store's identity does not hold", tag, id.Gen))
				}
			}
		default:
			return nil, s.fail(fmt.Errorf("the reservation script replied %v, not a reply it makes", res))
		}
		if serr != nil && !errors.Is(serr, errRetry) {
			return nil, serr
		}
	}
	if err != nil {
		// The commits carried may or may not have been made: they are
		// made (again, which changes nothing) by the flusher.
		s.requeueSettles(settles)
		// The script may have run, or may yet run (a stalled server reads
		// it later): the reservation is cancelled, in the background until
		// Redis answers, so that its cost is not held for a call that was
		// refused.
		s.retry(commitCmd{Keys: rkeys, RID: rid, Cost: cost, Void: true})
		return nil, s.fail(err)
	}
	ok, level, spent, n, err := parseReserveReply(res, len(levels))
	if errors.Is(err, errCancelled) {
		return nil, s.fail(err)
	}
	if err != nil {
		return nil, fmt.Errorf("spend store %s: %w", s.url, err)
	}
	if fresh == "1" {
		// The script made the tree's stamp (or found it made), whether or
		// not the budget had room: unless the store's identity was marked
		// lost meanwhile, by a proxy whose marking of every stamp came
		// before this one was made (checkNewStamp).
		if err := s.checkNewStamp(tag); err != nil {
			if ok {
				cmd := commitCmd{Keys: rkeys, RID: rid, Cost: cost}
				if cmd.run(s.ctx, s.c) != nil {
					s.retry(cmd)
				}
			}
			return nil, err
		}
		s.addTree(tag)
	}
	if !ok {
		l := levels[level]
		return nil, &ExceededError{Key: l.Key, Limit: l.Limit, Spent: spent, Cost: cost}
	}
	s.mu.Lock()
	grew := n > s.seen[keys[0]]
	if grew {
		if s.seen == nil {
			s.seen = make(map[string]int64)
		}
		s.seen[keys[0]] = n
	}
	if n > s.own[keys[0]] {
		if s.own == nil {
			s.own = make(map[string]int64)
		}
		s.own[keys[0]] = n
	}
	if s.machine != "" && n > s.mseen[keys[0]] {
		if s.mseen == nil {
			s.mseen = make(map[string]int64)
		}
		s.mseen[keys[0]] = n
		grew = true
	}
	if s.machine != "" && s.instance != "" && s.minst[keys[0]] != s.instance {
		if s.minst == nil {
			s.minst = make(map[string]string)
		}
		s.minst[keys[0]] = s.instance
		grew = true
	}
	if n > 0 && s.live != nil && s.liveFor(sent) == nil {
		// In the page cache at once, which a kill -9 does not lose. A
		// record cut while mapped is replaced by a new one holding this
		// proxy's counts, or the call is refused. A record that cannot
		// grow (a new tree's entry past its size, the state directory's
		// filesystem full) refuses the call too, released: forwarded, its
		// count was held only in memory until the next counts write, lost
		// by a kill within that second (red team 9). The next call of the
		// tree tries again.
		var cut *cutError
		err := s.live.raise(keys[0], n)
		if errors.As(err, &cut) {
			err = s.renewLive()
		} else if err != nil {
			err = fmt.Errorf("this proxy's live record %s in the state directory %s cannot hold the count of a new tree (%v): the call is refused until it can; free space there, or set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.live.path, s.stateDir, err)
		}
		if err != nil {
			s.mu.Unlock()
			cmd := commitCmd{Keys: rkeys, RID: rid, Cost: cost}
			if cmd.run(s.ctx, s.c) != nil {
				s.retry(cmd)
			}
			return nil, s.fail(err)
		}
	}
	if s.l.open == nil {
		s.l.open = make(map[uint64]*Reservation)
	}
	s.l.open[r.id] = r
	s.mu.Unlock()
	if grew {
		s.seenGrew()
	}
	return r, nil
}

// takeOver decides on a reservation's reply {9, h}: the machine's field
// of key (of tree tag) was raised last by instance h, not this proxy's.
// nil takes it over: the instance of the directory now at the state
// directory's path, which this proxy then runs as (followPath), or one
// the directory ran as, not before the one that last raised the key
// from it; else a SharedMachineError. An instance the list this proxy
// read does not name is looked for in the list again first (one the
// directory ran as since this proxy started: a reboot's cannot be, but
// the list may have been written since by a proxy of this directory).
func (s *Redis) takeOver(key, tag, h string) error {
	if s.followPath(h) {
		return nil
	}
	s.mu.Lock()
	_, known := s.irank[h]
	s.mu.Unlock()
	if !known && s.stateDir != "" {
		if rank, err := readInstances(s.stateDir, ""); err == nil {
			s.mu.Lock()
			if _, ok := rank[s.instance]; ok {
				s.irank = rank
			}
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.irank[h]; !ok {
		return &SharedMachineError{Store: s.url, Root: tag, Key: key, Machine: s.machine, Instance: h, Dir: s.stateDir}
	}
	if last := s.minst[key]; instRank(s.irank, h) < instRank(s.irank, last) {
		// An earlier instance of the directory wrote after a later one
		// had: only a copy of the directory (on another host, in another
		// container) still runs as it.
		return &SharedMachineError{Store: s.url, Root: tag, Key: key, Machine: s.machine, Instance: h, Dir: s.stateDir, Later: last}
	}
	return nil
}

// followPath reports whether h is this proxy's instance, making it so
// when h is the instance of the directory now at the state directory's
// path and that directory lists it: the directory this proxy started on
// is no longer the one at its path (moved to another disk, a symbolic
// link pointed at a copy, a remount that gave it another device
// number), and a proxy started since on the one there raised the key.
// The proxy then runs as that instance, as a proxy started now would, so
// the two do not take each other's field for a copy's. A copy of the
// directory in another container (same boot, same path) or on another
// host is never the directory at this proxy's path: its instance is
// another's, and the rules of takeOver hold for it.
func (s *Redis) followPath(h string) bool {
	s.mu.Lock()
	inst := s.instance
	s.mu.Unlock()
	if h == inst {
		return true // another call followed it already
	}
	if s.stateDir == "" || s.machine == "" || instanceToken(s.stateDir, s.machine) != h {
		return false
	}
	rank, err := readInstances(s.stateDir, "")
	if err != nil {
		return false
	}
	if _, ok := rank[h]; !ok {
		return false
	}
	s.mu.Lock()
	s.instance, s.irank = h, rank
	s.mu.Unlock()
	return true
}

// operatorActing reports whether an operator's store init --reset or
// store recover is giving the store a generation after gen: it records
// the generation it will write ("next", see markNext) before it restamps
// the trees.
func (s *Redis) operatorActing(gen int64) bool {
	v, err := s.c.HGet(s.ctx, identityKey, "next").Result()
	if err != nil {
		return false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && n > gen
}

// stampBehind handles a tree's stamp written under a generation before
// the proxy's id: the store went back to an older snapshot when its
// identity's generation is before the proxy's too (a loss of the store),
// else the stamp was made while an operator's new generation was
// written, and is brought up to it.
func (s *Redis) stampBehind(tag string, id Identity) error {
	cur, err := readIdentity(s.ctx, s.c)
	if err != nil {
		return s.fail(err)
	}
	if cur == nil {
		return s.resetStore(tag, fmt.Sprintf("its identity %s (generation %d) is gone: Redis was flushed or restarted without persistence", id.ID, id.Gen))
	}
	if cur.ID != id.ID || cur.Gen < id.Gen {
		return s.resetStore(tag, fmt.Sprintf("its identity is %s (generation %d), before the %s (generation %d) this proxy saw: Redis went back to an older snapshot", cur.ID, cur.Gen, id.ID, id.Gen))
	}
	if err := raiseStampScript.Run(s.ctx, s.c, []string{stampKeyPrefix + "{" + tag + "}"}, id.ID, id.Gen).Err(); err != nil {
		return s.fail(err)
	}
	return errRetry
}

// raiseStampScript brings a tree's stamp of identity ARGV[1] up to the
// generation ARGV[2].
var raiseStampScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] and tonumber(redis.call('HGET', KEYS[1], 'g') or '0') < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'g', ARGV[2])
end
return 1
`)

// scriptKeys returns the KEYS of the scripts for a reservation of the
// distinct keys keys with ID rid.
func scriptKeys(keys []string, rid string) []string {
	out := make([]string, 0, len(keys)+2)
	for _, k := range keys {
		out = append(out, spendKey(k))
	}
	return append(out, openKey(keys[0]), voidKey(keys[0], rid))
}

// retry runs cmd in the background until it succeeds, the store is
// closed or retryFor has passed, backing off between tries. One still
// unsent when the store is closed is written to the journal in the state
// directory, and sent by the next store opened there (see Close).
func (s *Redis) retry(cmd commitCmd) {
	s.mu.Lock()
	if s.unsent == nil {
		s.unsent = make(map[*commitCmd]bool)
	}
	c := &cmd
	s.unsent[c] = true
	// Nothing is started once Close waits for what runs: Close journals
	// it.
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.pending.Add(1)
	s.mu.Unlock()
	s.writeJournal(false)
	go func() {
		defer s.pending.Done()
		wait := 50 * time.Millisecond
		for end := time.Now().Add(retryFor); time.Now().Before(end); {
			if c.run(s.ctx, s.c) == nil {
				s.mu.Lock()
				delete(s.unsent, c)
				s.mu.Unlock()
				s.writeJournal(false)
				return
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
		}
	}()
}

// retryFor bounds how long a Commit, or the cancelling of a Reserve that
// got no reply, is retried.
const retryFor = 5 * time.Minute

// parseReserveReply reads the reply of reserveScript: ok, or the index of
// the level (of levels) that refused and the spend it found there.
func parseReserveReply(res []any, levels int) (ok bool, level int, spent, n int64, err error) {
	bad := fmt.Errorf("the reservation script replied %v, not a reply it makes", res)
	if len(res) == 0 {
		return false, 0, 0, 0, bad
	}
	flag, isInt := res[0].(int64)
	switch {
	case !isInt:
		return false, 0, 0, 0, bad
	case flag == 1 && len(res) == 2:
		n, isInt := res[1].(int64)
		if !isInt || n < 0 {
			return false, 0, 0, 0, bad
		}
		return true, 0, 0, n, nil
	case flag == 2 && len(res) == 1:
		return false, 0, 0, 0, errCancelled
	case flag != 0 || len(res) != 3:
		return false, 0, 0, 0, bad
	}
	lv, isInt := res[1].(int64)
	str, isStr := res[2].(string)
	if !isInt || !isStr || lv < 0 || lv >= int64(levels) {
		return false, 0, 0, 0, bad
	}
	spent, perr := parseDecimal(str)
	if perr != nil {
		return false, 0, 0, 0, bad
	}
	return false, int(lv), spent, 0, nil
}

// parseDecimal reads a non-negative decimal as the scripts write it (no
// sign, no leading zeros), saturating at the largest int64: a sum of a
// key's committed and held cost may pass it.
func parseDecimal(s string) (int64, error) {
	if s == "" || len(s) > 40 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a spend", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a spend", s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return math.MaxInt64, nil
	}
	return v, err
}

func indexOf(keys []string, key string) int {
	for i, k := range keys {
		if k == key {
			return i
		}
	}
	return -1
}

// errCancelled is the reply of a Reserve run after its cancelling (a
// retry of a command whose first reply was lost).
var errCancelled = errors.New("the reservation was cancelled before Redis ran it")

// rid is the fleet-wide ID of reservation id of this store.
func (s *Redis) rid(id uint64) string {
	return s.nonce + "." + strconv.FormatUint(id, 10)
}

// Commit implements Store. A commit at the reserved cost returns at once:
// the reservation already holds that cost, and moving it from held to
// committed is carried by the next Reserve of the same tree (in its round
// trip) or, failing one within settleLinger, sent by the flusher, batched
// with others, and retried until Redis takes it; spend reads the same
// meanwhile. A commit at another cost is one script run before
// Commit returns; if Redis does not answer, the reservation's cost stays
// charged and the commit is retried in the background.
func (s *Redis) Commit(r *Reservation, actual int64) error {
	if err := checkActual(actual); err != nil {
		return err
	}
	return s.end(r, actual)
}

// Release implements Store: Commit at no cost, in one script run.
func (s *Redis) Release(r *Reservation) error {
	return s.end(r, 0)
}

func (s *Redis) end(r *Reservation, actual int64) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.errClosed()
	}
	if err := s.l.end(r); err != nil {
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	rkeys, rid := scriptKeys(r.keys, s.rid(r.id)), s.rid(r.id)
	if actual == r.cost {
		s.queueSettle(settleCmd{rkeys, rid, r.cost})
		return nil
	}
	// A reply of 0 means the reservation had ended already: a command
	// whose reply was lost ran before its retry.
	cmd := commitCmd{Keys: rkeys, RID: rid, Cost: r.cost, Actual: actual}
	if err := cmd.run(s.ctx, s.c); err != nil {
		// The reservation keeps its cost charged in Redis until a retry
		// gets through.
		s.retry(cmd)
		return fmt.Errorf("%w; it is retried in the background, and the reservation's cost stays charged until it gets through", s.fail(err))
	}
	return nil
}

// settleCmd is a commit at the reserved cost.
type settleCmd struct {
	keys []string
	rid  string
	cost int64
}

// queueSettle queues a commit at the reserved cost for the flusher.
func (s *Redis) queueSettle(c settleCmd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // the cost stays charged, as held
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	s.settle = append(s.settle, c)
	if !s.flushing {
		s.flushing = true
		s.pending.Add(1)
		go s.flush()
	}
}

// maxCarried bounds the commits one Reserve carries.
const maxCarried = 64

// settleLinger is how long a queued commit waits for a Reserve of its tree
// to carry it before the flusher sends it.
const settleLinger = 2 * time.Millisecond

// takeSettles removes from the queue, and returns, up to maxCarried
// commits of reservations whose open-reservations hash is open: those of
// the same tree, which a Reserve of that tree can carry.
func (s *Redis) takeSettles(open string) []settleCmd {
	s.smu.Lock()
	defer s.smu.Unlock()
	var out []settleCmd
	kept := s.settle[:0]
	for _, c := range s.settle {
		if len(out) < maxCarried && c.keys[len(c.keys)-2] == open {
			out = append(out, c)
		} else {
			kept = append(kept, c)
		}
	}
	clear(s.settle[len(kept):])
	s.settle = kept
	return out
}

// requeueSettles puts commits a Reserve carried back in the queue, when
// it is not known whether they were made.
func (s *Redis) requeueSettles(cs []settleCmd) {
	for _, c := range cs {
		s.queueSettle(c)
	}
}

// flush sends the queued commits, a batch per round trip, until none is
// left. A batch that fails is retried with backoff until it gets through
// or the store is closed; meanwhile the costs stay charged as held.
func (s *Redis) flush() {
	defer s.pending.Done()
	wait := 50 * time.Millisecond
	for {
		// A Reserve of the same tree may carry the commits meanwhile.
		select {
		case <-s.ctx.Done():
		case <-time.After(settleLinger):
		}
		s.smu.Lock()
		batch := s.settle
		s.settle = nil
		if len(batch) == 0 {
			s.flushing = false
			s.smu.Unlock()
			return
		}
		s.smu.Unlock()
		for {
			_, err := s.c.Pipelined(s.ctx, func(p redis.Pipeliner) error {
				for _, c := range batch {
					commitScript.EvalSha(s.ctx, p, c.keys, c.rid, c.cost, c.cost, "", 0)
				}
				return nil
			})
			if err == nil {
				break
			}
			if isNoScript(err) {
				commitScript.Load(s.ctx, s.c)
				continue
			}
			select {
			case <-s.ctx.Done():
				// Closed: the batch is journalled with the queue.
				s.smu.Lock()
				s.settle = append(s.settle, batch...)
				s.smu.Unlock()
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
		}
		wait = 50 * time.Millisecond
	}
}

// isNoScript reports whether err says the server has lost a script (it
// restarted): it is loaded again.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Spent implements Store with one read. When Redis does not answer it
// returns the last spend this store read for the key (0 if none): callers
// that decide use Reserve, which refuses.
func (s *Redis) Spent(key string) int64 {
	vals, err := s.c.HMGet(s.ctx, spendKey(key), "c", "h").Result()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		var sum int64
		for _, v := range vals {
			if str, ok := v.(string); ok {
				if n, err := parseDecimal(str); err == nil {
					sum = addSat(sum, n)
				}
			}
		}
		if s.last == nil {
			s.last = make(map[string]int64)
		}
		s.last[key] = sum
		return sum
	}
	return s.last[key]
}

// Close closes the connections. Reservations still open stay charged in
// Redis. Commits and cancellations that have not reached Redis after
// closeWait are written to a journal in the state directory (given to
// OpenRedisIn), which the next store opened on it sends. Closing twice
// does nothing.
func (s *Redis) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	// Retries in flight get a moment to finish before they are stopped.
	done := make(chan struct{})
	go func() { s.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
	s.stop()
	s.pending.Wait()
	if s.watchDone != nil {
		<-s.watchDone
	}
	if s.evictDone != nil {
		<-s.evictDone
	}
	s.writeJournal(true)
	saved := s.storeSeen(false) == nil
	s.mu.Lock()
	saved = saved && !s.seenUnsure
	s.mu.Unlock()
	s.dropOwnFields()
	s.mu.Lock()
	for _, l := range append(s.liveOld, s.live) {
		if l != nil {
			l.close(saved)
		}
	}
	s.live, s.liveOld = nil, nil
	if s.epoch != nil {
		s.epoch.close()
		s.epoch = nil
	}
	return s.c.Close()
}

// watchEviction polls the server's eviction state every
// redisconn.WatchEvery until the store closes. When the server evicted
// keys since the last poll, any of them may be the store's (a spend key,
// a stamp, the identity): the store is marked reset as a proxy that found
// it lost data marks it (markStoreReset: every tree's stamp and the
// identity), so that this proxy, the fleet's running proxies and a proxy
// started later (on a new machine too) refuse store_reset until an
// operator runs store recover or store init --reset. Its mark is made
// again at each poll that finds more evictions (the mark itself may have
// been evicted while the policy allowed it), and so stays once the policy
// is noeviction again.
func (s *Redis) watchEviction() {
	defer close(s.evictDone)
	pending := "" // an eviction whose marks have not landed yet
	t := time.NewTicker(redisconn.WatchEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		why, err := s.evict.Poll(s.ctx)
		if err == nil && why != "" {
			// This proxy refuses at once, whether or not the marks land.
			s.mu.Lock()
			if s.resetReason == "" {
				s.resetReason = why
			}
			s.mu.Unlock()
			pending = why
		}
		if pending != "" && s.markStoreReset(s.ctx, pending) == nil {
			pending = ""
		}
	}
}

// liveFor makes the live record of identity id current (s.mu held): a
// new one when the identity or generation changed, the earlier kept
// until Close.
func (s *Redis) liveFor(id Identity) error {
	if s.live != nil && s.live.id == id.ID && s.live.gen == id.Gen {
		return nil
	}
	s.liveSeq++
	name := s.nonce + "." + strconv.Itoa(s.liveSeq)
	l, err := openLive(s.livePrefix(id.ID)+name, s.newPrefix(id.ID)+name, id.ID, id.Gen, s.machine, s.instance)
	if err != nil {
		return err
	}
	if s.live != nil {
		s.liveOld = append(s.liveOld, s.live)
	}
	s.live = l
	return nil
}

// dropOwnFields removes, at exit, this proxy's field p:NONCE from each
// first key it reserved on: it guards a running proxy only (a restarted
// one has a new nonce, and the machine's field and counts file guard it),
// and proxies run one per session would otherwise leave a field each, for
// ever. A failure leaves the fields, as a killed proxy does.
func (s *Redis) dropOwnFields() {
	s.mu.Lock()
	keys := make([]string, 0, len(s.own))
	for k := range s.own {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.HDel(ctx, spendKey(k), "p:"+s.nonce)
		}
		return nil
	})
}

// closeWait is how long Close lets background retries run.
const closeWait = 2 * time.Second

func (s *Redis) errClosed() error {
	return fmt.Errorf("spend store %s is closed", s.url)
}

// Open opens the spend store a policy names: a redis:// or rediss:// URL
// (OpenRedis), or else a file path: a SQLite database shared by every
// process on the machine (OpenSQLite), created if there is none, or a
// spend log of an earlier version (OpenFile), which one process only can
// hold and which store migrate turns into a database. stateDir is where
// this machine keeps what it must remember of a Redis store (see
// StateDir for the CLI's default); "" keeps nothing, with a warning.
func Open(pathOrURL, stateDir string) (Store, error) {
	if redisconn.IsURL(pathOrURL) {
		err := StateDirError()
		if err == nil {
			err = CheckStateDir(stateDir)
		}
		if err != nil {
			return nil, &StateError{fmt.Errorf("spend store %s: %w", redisconn.Redact(pathOrURL), err)}
		}
		dir := stateDir
		r, err := OpenRedisIn(pathOrURL, dir)
		if err != nil {
			return nil, err
		}
		if dir == "" {
			r.warnings = append(r.warnings, "no state directory (neither DELEGATEOS_STATE_DIR, XDG_STATE_HOME nor a home directory is set): a proxy restarted after the spend store lost data, or went back to an older snapshot, will not notice it; set DELEGATEOS_STATE_DIR")
		}
		return r, nil
	}
	shared, err := isSQLitePath(pathOrURL)
	if err != nil {
		return nil, fmt.Errorf("spend store %s: %w", pathOrURL, err)
	}
	if shared {
		s, err := OpenSQLite(pathOrURL, SQLiteOptions{})
		if err != nil {
			return nil, err // not a nil *SQLite in a non-nil interface
		}
		return s, nil
	}
	f, err := OpenFile(pathOrURL)
	if err != nil {
		return nil, err // not a nil *File in a non-nil interface
	}
	f.warnings = append(f.warnings, legacyWarning(pathOrURL))
	return f, nil
}
