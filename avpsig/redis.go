package avpsig

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// DefaultClockSkew is RedisNonces.Skew as OpenRedisNonces sets it.
const DefaultClockSkew = 5 * time.Second

// nonceKeyPrefix begins the Redis key of a spent nonce: then the signer's
// did:key in braces (a Redis Cluster hash tag: one signer's nonces on one
// shard), a colon and the nonce. A did:key holds no brace, so the key
// splits back into its DID and nonce one way only.
const nonceKeyPrefix = redisconn.Prefix + "nonce:"

// nonceKey returns the Redis key of a signer's nonce.
func nonceKey(signer ed25519.PublicKey, nonce string) string {
	return nonceKeyPrefix + "{" + identity.DIDFromPublicKey(signer) + "}:" + nonce
}

// windowKey holds the fleet's window: the longest Window, in milliseconds,
// of the Verifiers that share the store, as the first to Join recorded it.
const windowKey = redisconn.Prefix + "nonce-window"

// RedisNonces is a NonceStore kept in Redis, shared by every Verifier that
// opens the same URL: a fleet of servers behind a load balancer accepts
// each nonce once between them. A spend is one script, atomic at the
// server (SET key 1 NX PX ttl), so of two servers spending one nonce at
// once exactly one succeeds. The key lives until the signature's
// timestamp leaves the spending Verifier's window, or the fleet's Window
// if that is longer, plus Skew, on the Redis server's clock: a nonce
// spent at a server with a short window is remembered for as long as any
// server of the fleet takes its signature, and a signature older than
// that by the server's clock is refused as stale, so a verifier whose
// clock lags cannot take it again once its key is gone.
//
// Each tree's live nonces are bounded (MaxPerTree), and counted in a
// sorted set of the tree beside the nonces' own keys, in the same script;
// the trees are bounded by the tokens the roots issue, since a Verifier
// spends a nonce only for a signature that verified, and a server only
// for the holder of a token the gate takes. On one Redis server a spend
// is one script over both keys. On a Redis Cluster the two keys are in
// different slots (the nonce's by signer, the set's by tree), so a spend
// is two scripts: the first counts the nonce in its tree's set (or finds
// it there), the second spends the nonce's key, which still decides
// alone whether a nonce is new, whatever tree its request claims; a
// replay that had added the nonce to another tree's set takes it out
// again. Each key lives at most
// the window plus MaxAhead plus Skew. When Redis does not
// answer (down, stalled, past its timeouts) Spend refuses with
// ReasonUnavailable, and the request with it.
type RedisNonces struct {
	// Skew is added to each key's life, for servers whose clocks differ:
	// a server whose clock runs d behind the one that spent a nonce still
	// takes its timestamp for d longer.
	Skew time.Duration
	// Window is the longest window of the Verifiers that share the store;
	// Join sets it.
	Window time.Duration
	// MaxPerTree bounds the live nonces of one delegation tree
	// (Nonce.Tree), so that the holders of one token, however many keys
	// they sign with, hold at most that many keys in Redis; a spend beyond
	// it is refused (ReasonBusy). Zero means DefaultMaxNoncesPerTree.
	MaxPerTree int

	c    redisconn.Client
	what string // the store, for messages: its URL without the password
	// evict, set by ShareNonces, watches the server's eviction policy
	// and evicted keys every redisconn.WatchEvery off the calls' path
	// (watch): a policy that may evict refuses every spend
	// (ReasonUnavailable), and an eviction makes the store's nonces lost
	// until lostUntil: lostFor after it was found, the longest a nonce's
	// key lives, by when every signature whose nonce may have been
	// evicted is stale. watchDone is closed when the watch returns.
	evict     *redisconn.Eviction
	lostFor   time.Duration
	watchStop context.CancelFunc
	watchDone chan struct{}
	mu        sync.Mutex
	lostUntil time.Time
	lostWhy   string
	// callerClock, set by tests only, puts the verifier's clock (the
	// Nonce's Now) in place of the server's, so that tests can fix time.
	callerClock bool
}

var _ NonceStore = (*RedisNonces)(nil)

// OpenRedisNonces returns the nonce store at a redis:// or rediss:// URL,
// with Skew set to DefaultClockSkew. It does not connect: the first Spend
// does.
func OpenRedisNonces(rawURL string) (*RedisNonces, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return nil, fmt.Errorf("nonce store: %w", err)
	}
	return &RedisNonces{Skew: DefaultClockSkew, c: c, what: "nonce store " + redisconn.Redact(rawURL)}, nil
}

// ShareNonces makes v spend its nonces in the Redis at rawURL, which
// every Verifier that uses it shares, so that they accept a signed request
// once between them: it joins the fleet (RedisNonces.Join) with v's window,
// and bounds each delegation tree there by v's MaxNoncesPerTree. A server
// whose maxmemory-policy may evict keys is refused (redisconn.CheckConfig):
// a spent nonce is a key with a time to live, the first a volatile policy
// drops, and a request signed once would be accepted again.
func (v *Verifier) ShareNonces(ctx context.Context, rawURL string) error {
	s, err := OpenRedisNonces(rawURL)
	if err != nil {
		return err
	}
	if _, err := redisconn.CheckConfig(ctx, s.c, s.what); err != nil {
		s.Close()
		return fmt.Errorf("signature nonces cannot be shared in Redis: %w", err)
	}
	w := v.Window
	if w == 0 {
		w = DefaultWindow
	}
	if err := s.Join(ctx, w); err != nil {
		s.Close()
		return fmt.Errorf("signature nonces cannot be shared in Redis: %w", err)
	}
	s.MaxPerTree = v.MaxNoncesPerTree
	// A nonce's key lives until its signature is stale at every server:
	// its timestamp (at most maxAhead after the spend) plus the fleet's
	// window and a second, plus Skew; a poll every WatchEvery finds an
	// eviction at most that late.
	s.lostFor = s.Window + time.Duration(v.maxAhead())*time.Second + time.Second + s.Skew + redisconn.WatchEvery
	if s.evict, err = redisconn.WatchEviction(ctx, s.c, s.what); err != nil {
		s.Close()
		return fmt.Errorf("signature nonces cannot be shared in Redis: %w", err)
	}
	wctx, stop := context.WithCancel(context.Background())
	s.watchStop, s.watchDone = stop, make(chan struct{})
	go s.watch(wctx)
	v.Store = s
	return nil
}

// Unverifiable returns a warning for the start when the server refuses
// what the eviction watch reads (INFO or CONFIG), else "".
func (r *RedisNonces) Unverifiable() string {
	if r.evict == nil {
		return ""
	}
	return r.evict.Unverifiable()
}

// watch polls the server's eviction state until Close (see evict). An
// eviction may have dropped any spent nonce (a volatile policy drops the
// keys with a time to live first, and every nonce has one): the store
// refuses every spend until each signature whose nonce it may have
// dropped is stale, rather than take one again. An eviction found again
// later pushes the end on.
func (r *RedisNonces) watch(ctx context.Context) {
	defer close(r.watchDone)
	t := time.NewTicker(redisconn.WatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		why, err := r.evict.Poll(ctx)
		if err != nil || why == "" {
			continue
		}
		r.mu.Lock()
		r.lostUntil, r.lostWhy = time.Now().Add(r.lostFor), why
		r.mu.Unlock()
	}
}

// evictErr returns the refusal of a spend while the server may evict or
// its nonces may have been evicted, else nil: loads from memory.
func (r *RedisNonces) evictErr() error {
	if r.evict == nil {
		return nil
	}
	if err := r.evict.Err(); err != nil {
		return &Error{Reason: ReasonUnavailable, Detail: fmt.Sprintf("%v; a spent nonce may be dropped, so the request is refused", err), Err: err}
	}
	r.mu.Lock()
	until, why := r.lostUntil, r.lostWhy
	r.mu.Unlock()
	if left := time.Until(until); left > 0 {
		err := redisconn.Unavailable(r.what, fmt.Errorf("%s", why))
		return &Error{Reason: ReasonUnavailable, Detail: fmt.Sprintf("%v; the nonces spent before may be gone, so signed requests are refused until every signature they covered is stale (%s more)", err, left.Round(time.Second)), Err: err}
	}
	return nil
}

// Join records w, the window of a Verifier that is to spend nonces in the
// store, as the fleet's window unless one is recorded already, and sets
// Window to the fleet's. It fails when w is longer than the fleet's: the
// servers already running remember their nonces only for the fleet's
// window, so this Verifier would take a signature again once they forgot
// it. The fleet's window is raised by writing the new one to the key
// delegateos:nonce-window (in milliseconds) and restarting every server,
// before any server with the longer window starts.
func (r *RedisNonces) Join(ctx context.Context, w time.Duration) error {
	ms := (w + time.Millisecond - 1).Milliseconds()
	if err := r.c.SetNX(ctx, windowKey, ms, 0).Err(); err != nil {
		return redisconn.Unavailable(r.what, err)
	}
	v, err := r.c.Get(ctx, windowKey).Result()
	if err != nil {
		return redisconn.Unavailable(r.what, err)
	}
	fleet, err := strconv.ParseInt(v, 10, 64)
	if err != nil || fleet < 1 || fleet > math.MaxInt64/int64(time.Millisecond) {
		return fmt.Errorf("%s: the key %s holds %q, not a window in milliseconds", r.what, windowKey, v)
	}
	r.Window = time.Duration(fleet) * time.Millisecond
	if ms > fleet {
		return fmt.Errorf("this server's signature window, %s, is longer than %s, the window of the servers that share the %s: they forget a nonce once its signature is %s old, and this server would take it again; use a window of at most %s, or raise the fleet's (set %s to %d and restart every server that shares it first)", w, r.Window, r.what, r.Window, r.Window, windowKey, ms)
	}
	return nil
}

// treeKeyPrefix begins the Redis key of a tree's live nonces (a sorted
// set, see spendScript): then the tree (Nonce.Tree, else the signer's
// did:key) in braces.
const treeKeyPrefix = redisconn.Prefix + "nonce-tree:"

// treeKey returns the Redis key of the live nonces of n's tree.
func treeKey(n Nonce) string {
	return treeKeyPrefix + "{" + redisconn.HashTag(n.tree()) + "}"
}

// luaNow begins each nonce script: now is ARGV[2], the caller's clock in
// Unix milliseconds, or else the server's (TIME).
const luaNow = `
local now = tonumber(ARGV[2])
if not now then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
end
`

// spendScript spends the nonce KEYS[1] until ARGV[1], in Unix
// milliseconds on the server's clock (TIME), or ARGV[2] when given, and
// counts it in its tree's sorted set KEYS[2] as the member ARGV[4] with
// that end as its score. It returns 0 when the end has passed (the
// signature is stale by that clock, whatever the clock of the verifier),
// 1 when the nonce was not spent and now is, 2 when it was spent (its
// key is there, or, its key lost alone, an eviction or a DEL, its live
// member in the tree's set: two keys must go for a replay), and 3
// when the tree holds ARGV[3] live nonces already (busy): only members
// whose end has not passed count, and the others are dropped. The first
// write is the SET, which Redis refuses when it is out of memory (a
// script that has written may go on writing). Every verifier of a fleet thus counts a nonce's life on one
// clock: one whose clock lags takes a signature the others would call
// stale, but the server refuses it rather than take it again once its
// key is gone. The nonce's own key stays one per signer and nonce, so a
// nonce is spent once whatever tree its request claims.
var spendScript = redis.NewScript(luaNow + `
local last = tonumber(ARGV[1])
local ttl = last - now
if ttl <= 0 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
local score = redis.call('ZSCORE', KEYS[2], ARGV[4])
if score and tonumber(score) > now then return 2 end
local after = string.format('(%d', now)
if redis.call('ZCOUNT', KEYS[2], after, '+inf') >= tonumber(ARGV[3]) then return 3 end
redis.call('SET', KEYS[1], '1', 'PX', ttl)
redis.call('ZADD', KEYS[2], last, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now))
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
`)

// reserveScript is the first half of a spend on a Redis Cluster, at the
// tree's set KEYS[1]: as spendScript, with ARGV[1] the end, ARGV[2] the
// clock, ARGV[3] the bound and ARGV[4] the member. It returns 0 when the
// end has passed, 3 when the tree is busy, 1 when it added the member and
// 5 when the member was in the set already (the nonce was counted there
// before: a replay, or a retry of a spend that failed).
var reserveScript = redis.NewScript(luaNow + `
local last = tonumber(ARGV[1])
local ttl = last - now
if ttl <= 0 then return 0 end
local after = string.format('(%d', now)
local score = redis.call('ZSCORE', KEYS[1], ARGV[4])
if score and tonumber(score) > now then return 5 end
if redis.call('ZCOUNT', KEYS[1], after, '+inf') >= tonumber(ARGV[3]) then return 3 end
redis.call('ZADD', KEYS[1], last, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
`)

// nonceScript is the second half of a spend on a Redis Cluster, at the
// nonce's key KEYS[1]: it returns 0 when the end ARGV[1] has passed on
// the clock (ARGV[2], else TIME), 1 when the nonce was not spent and now
// is (its key holds the tree ARGV[3]), 2 when it was spent with this tree
// and 4 when it was spent with another (or by a single-server script).
var nonceScript = redis.NewScript(luaNow + `
local ttl = tonumber(ARGV[1]) - now
if ttl <= 0 then return 0 end
local v = redis.call('GET', KEYS[1])
if v then
  if v == ARGV[3] then return 2 end
  return 4
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ttl)
return 1
`)

// untreeScript takes the member ARGV[1] out of the tree's set KEYS[1].
var untreeScript = redis.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)

// spendCluster is a spend on a Redis Cluster (see RedisNonces): the tree's
// set first, then the nonce's key. A replay is refused by the nonce's key;
// if it was spent with another tree and this spend added it to this
// tree's set, it is taken out again, so that replays cannot fill a tree.
// A nonce spent with this tree keeps its member: it is the spend's own.
func (r *RedisNonces) spendCluster(ctx context.Context, n Nonce, endMs int64, now any, perTree int, member string) (int64, error) {
	tk := treeKey(n)
	res, err := reserveScript.Run(ctx, r.c, []string{tk}, endMs, now, perTree, member).Int64()
	if err != nil || res == 0 || res == 3 {
		return res, err
	}
	added := res == 1
	res, err = nonceScript.Run(ctx, r.c, []string{nonceKey(n.Signer, n.Nonce)}, endMs, now, n.tree()).Int64()
	if err != nil {
		return 0, err // the member stays until its end: it counts, never frees
	}
	if res == 4 {
		if added {
			_ = untreeScript.Run(ctx, r.c, []string{tk}, member).Err()
		}
		res = 2
	}
	return res, nil
}

// Spend implements NonceStore with one round trip on one Redis server: a
// script that checks the nonce's life on the server's clock and its
// tree's bound, and spends it (on a Cluster, see spendCluster).
func (r *RedisNonces) Spend(ctx context.Context, n Nonce) error {
	if len(n.Signer) != ed25519.PublicKeySize {
		return refuse(ReasonWrongKey, "the signer's key has %d bytes, not %d", len(n.Signer), ed25519.PublicKeySize)
	}
	if err := r.evictErr(); err != nil {
		return err
	}
	until := n.Expires
	if fleet := n.Signed.Add(r.Window + time.Second); !n.Signed.IsZero() && fleet.After(until) {
		until = fleet
	}
	end := until.Add(r.Skew)
	endMs := (end.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	var now any = ""
	if r.callerClock {
		now = n.Now.UnixMilli()
	}
	perTree := r.MaxPerTree
	if perTree <= 0 {
		perTree = DefaultMaxNoncesPerTree
	}
	did := n.DID
	if did == "" {
		did = identity.DIDFromPublicKey(n.Signer)
	}
	var res int64
	var err error
	if _, cluster := r.c.(*redis.ClusterClient); cluster {
		res, err = r.spendCluster(ctx, n, endMs, now, perTree, did+":"+n.Nonce)
	} else {
		keys := []string{nonceKey(n.Signer, n.Nonce), treeKey(n)}
		res, err = spendScript.Run(ctx, r.c, keys, endMs, now, perTree, did+":"+n.Nonce).Int64()
	}
	switch {
	case err != nil:
		err = redisconn.Unavailable(r.what, err)
		return &Error{Reason: ReasonUnavailable, Detail: fmt.Sprintf("%v; the nonce cannot be checked, so the request is refused: retry", err), Err: err}
	case res == 1:
		return nil
	case res == 2:
		return refuse(ReasonReplayed, "nonce %s was already used by %s", n.Nonce, n.DID)
	case res == 3:
		return refuse(ReasonBusy, "%d nonces of %s's delegation tree are live in the %s, the most it holds for one tree; retry later", perTree, n.DID, r.what)
	case res == 0:
		return refuse(ReasonStale, "the signature of nonce %s by %s is stale by the clock of the %s, which the servers sharing it count nonces on (this server's clock may lag)", n.Nonce, n.DID, r.what)
	}
	return &Error{Reason: ReasonUnavailable, Detail: fmt.Sprintf("%s: the spend script replied %d, not a reply it makes; the request is refused", r.what, res)}
}

// Close closes the connections to Redis.
func (r *RedisNonces) Close() error {
	if r.watchStop != nil {
		r.watchStop()
		<-r.watchDone
	}
	return r.c.Close()
}
