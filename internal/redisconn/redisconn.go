// Package redisconn opens the Redis connections the shared stores use (a
// spend store, a revocation list or an ended-delegation set named by a
// redis:// or rediss:// URL, or a Redis Cluster's redis+cluster:// URL),
// and names the error every store returns when Redis cannot answer.
//
// A client never retries a command more than once (OpenOnce's never
// does), and waits at most Timeout for each reply, so a call that needs
// Redis is refused within a bounded time when Redis is down or stalled. The pool reconnects by
// itself: after repeated dial failures it waits (backing off) before
// dialling again, and each command meanwhile fails fast.
package redisconn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeout is how long a command waits for Redis to accept it or to reply,
// unless the URL's read_timeout, write_timeout or dial_timeout say
// otherwise.
const Timeout = time.Second

// Prefix begins every key the stores write, so that a Redis shared with
// other programs keeps them apart.
const Prefix = "delegateos:"

// ErrUnavailable is matched (errors.Is) by the error of every store
// operation that could not reach Redis, or got no answer in time. The call
// that needed it is refused: a store never decides on data it could not
// read.
var ErrUnavailable = errors.New("store unavailable")

// ErrReset is matched (errors.Is) by the error of a store operation that
// found the store has lost data it held: its identity or generation is
// gone or changed, or a tree's counts moved backwards. The call is refused
// (store_reset) until an operator acts.
var ErrReset = errors.New("store reset")

// UnavailableError is an operation on What (such as "spend store
// redis://host:6379/0") that Redis did not answer.
type UnavailableError struct {
	What string
	Err  error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s is unavailable: %v", e.What, e.Err)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) hold.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// quiet drops the client's own log lines: it would write them to the
// process's standard error, and every failure they describe reaches the
// stores as an error that says what it is.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

// IsURL reports whether s names a Redis store rather than a file: a
// redis:// or rediss:// URL, or a Redis Cluster's redis+cluster:// or
// rediss+cluster:// URL.
func IsURL(s string) bool {
	for _, p := range schemes {
		if strings.HasPrefix(s, p+"://") {
			return true
		}
	}
	return false
}

// schemes are the URL schemes of a Redis store.
var schemes = []string{"redis", "rediss", "redis+cluster", "rediss+cluster"}

// IsCluster reports whether a store URL names a Redis Cluster: its scheme
// is redis+cluster:// or rediss+cluster://, or it lists several seed
// nodes (redis://host:port,host:port/0).
func IsCluster(rawURL string) bool {
	return strings.HasPrefix(rawURL, "redis+cluster://") || strings.HasPrefix(rawURL, "rediss+cluster://") ||
		(IsURL(rawURL) && strings.Contains(hostPart(rawURL), ","))
}

// hostPart returns the host list of a URL: what is between "//" (and any
// userinfo) and the path.
func hostPart(rawURL string) string {
	_, rest, _ := strings.Cut(rawURL, "://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return rest
}

// Redact returns the URL with its password replaced by "xxxxx", for
// messages and logs.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "redis URL"
	}
	return u.Redacted()
}

// Options returns the client options of a redis:// or rediss:// URL (the
// forms and query parameters of redis.ParseURL), with this package's
// timeouts and retry policy where the URL sets none.
func Options(rawURL string) (*redis.Options, error) {
	if !IsURL(rawURL) || IsCluster(rawURL) {
		return nil, fmt.Errorf("%q is not a redis:// or rediss:// URL", Redact(rawURL))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the URL, password and all.
		return nil, errors.New("a redis URL does not parse (its text is not repeated here, since it may hold a password)")
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Redact(rawURL), err)
	}
	q := u.Query()
	set := func(name string, d *time.Duration) {
		if !q.Has(name) {
			*d = Timeout
		}
	}
	set("dial_timeout", &o.DialTimeout)
	set("read_timeout", &o.ReadTimeout)
	set("write_timeout", &o.WriteTimeout)
	if !q.Has("max_retries") {
		o.MaxRetries = 1
	}
	if !q.Has("min_retry_backoff") {
		o.MinRetryBackoff = 10 * time.Millisecond
	}
	if !q.Has("max_retry_backoff") {
		o.MaxRetryBackoff = 200 * time.Millisecond
	}
	// The stores' scripts and subscriptions need RESP2 or RESP3 alike; no
	// client-side caching or identity is used.
	o.DisableIdentity = true
	return o, nil
}

// ClusterOptions returns the client options of a Redis Cluster URL:
// redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…][/0][?PARAMS], or
// rediss+cluster:// for TLS (verified against the first seed's name), or
// a redis:// or rediss:// URL that lists several seeds. The seeds are
// where the client learns the cluster's shards from; any one that answers
// will do. The query parameters are those of Options; a cluster has
// database 0 only.
func ClusterOptions(rawURL string) (*redis.ClusterOptions, error) {
	if !IsCluster(rawURL) {
		return nil, fmt.Errorf("%q is not a redis+cluster:// URL", Redact(rawURL))
	}
	scheme, rest, _ := strings.Cut(rawURL, "://")
	hosts := hostPart(rawURL)
	seeds := strings.Split(hosts, ",")
	for _, h := range seeds {
		if h == "" {
			return nil, fmt.Errorf("%s: a seed of the cluster is empty", Redact(rawURL))
		}
	}
	// The options of the first seed, as a one-server URL, give the rest.
	single := strings.TrimSuffix(scheme, "+cluster") + "://" + strings.Replace(rest, hosts, seeds[0], 1)
	o, err := Options(single)
	if err != nil {
		return nil, err
	}
	if o.DB != 0 {
		return nil, fmt.Errorf("%s: a Redis Cluster has database 0 only, not %d", Redact(rawURL), o.DB)
	}
	return &redis.ClusterOptions{
		Addrs: seeds, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns, ConnMaxIdleTime: o.ConnMaxIdleTime,
		ConnMaxLifetime: o.ConnMaxLifetime, PoolTimeout: o.PoolTimeout, ClientName: o.ClientName,
		Protocol: o.Protocol, DisableIdentity: true,
		// A failover moves a shard's slots to its replica: the client
		// follows MOVED and asks the cluster for its shards again, a few
		// times, before the command fails.
		MaxRedirects: 3,
	}, nil
}

// Client is what the stores use of a Redis client: a single server's
// (*redis.Client) or a cluster's (*redis.ClusterClient). Every script a
// store runs keeps its keys in one hash slot, and pub/sub reaches every
// node of a cluster.
type Client = redis.UniversalClient

// Open returns a client for the URL: a cluster client for a Redis
// Cluster URL (IsCluster), else a single server's. It does not connect:
// the first command does, and fails with the connection's error.
func Open(rawURL string) (Client, error) {
	return open(rawURL, false)
}

// OpenOnce is Open for a client that never retries a command, whatever
// the URL says: a script that takes something (a rate-limit slot) may
// have run when its reply timed out, and a retry, on another connection,
// would run it again. A command that fails is the caller's to refuse. A
// cluster client does not follow a MOVED or ASK reply either (go-redis
// would also resend a command that timed out on the way): the command is
// refused, the client reads the slot map again, and the next command
// goes to the slot's new primary.
func OpenOnce(rawURL string) (Client, error) {
	return open(rawURL, true)
}

func open(rawURL string, once bool) (Client, error) {
	if IsCluster(rawURL) {
		o, err := ClusterOptions(rawURL)
		if err != nil {
			return nil, err
		}
		if once {
			o.MaxRetries, o.MaxRedirects = -1, -1
		}
		cc := redis.NewClusterClient(o)
		cc.AddHook(reloadOnFailure{cc})
		return cc, nil
	}
	o, err := Options(rawURL)
	if err != nil {
		return nil, err
	}
	if once {
		o.MaxRetries = -1
	}
	return redis.NewClient(o), nil
}

// reloadOnFailure asks a cluster client to read the cluster's slot map
// again (in the background, at most one read at a time) whenever a
// command or a dial fails without a reply from Redis: a primary that died
// keeps its slots in the client's map until the map is read again, which
// the client does by itself only on a MOVED reply or every 10 s, and a
// replica promoted in its place sends no MOVED to a client that does not
// reach it.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) failed(err error) {
	var rerr redis.Error
	if err != nil && !errors.Is(err, redis.Nil) && (!errors.As(err, &rerr) || isTransient(rerr.Error())) {
		h.c.ReloadState(context.Background())
	}
}

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		h.failed(err)
		return conn, err
	}
}

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.failed(err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.failed(err)
		return err
	}
}

// NodeFor returns the client of the server that holds key: c itself for
// a single server, else the primary of the key's slot in a cluster. A
// command without keys (WAIT) about a key's write is sent to it.
func NodeFor(ctx context.Context, c Client, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("a Redis client of type %T", c)
}

// Scan calls f with the names of the keys that match pattern, a batch at
// a time, on every primary of a cluster or on the one server.
func Scan(ctx context.Context, c Client, pattern string, f func(names []string) error) error {
	scan := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			names, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			if err := f(names); err != nil {
				return err
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	switch c := c.(type) {
	case *redis.Client:
		return scan(ctx, c)
	case *redis.ClusterClient:
		var mu sync.Mutex
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			// f is called for one primary at a time.
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, n)
		})
	}
	return fmt.Errorf("a Redis client of type %T", c)
}

// Unavailable wraps err, an error of a command sent for what, as an
// *UnavailableError, unless it is a reply Redis made (a script error),
// which is returned as it is.
func Unavailable(what string, err error) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !isTransient(rerr.Error()) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if rerr != nil && strings.HasPrefix(rerr.Error(), "MOVED ") && !strings.Contains(what, "+cluster://") {
		// A one-server URL that names a node of a Redis Cluster.
		err = fmt.Errorf("%w (the server is a node of a Redis Cluster: name the cluster as redis+cluster://HOST:PORT,HOST:PORT/0)", err)
	}
	return &UnavailableError{What: what, Err: err}
}

// isTransient reports whether a reply from Redis says it cannot serve
// now (loading its data, a replica cut off, a busy script, a cluster
// whose slots are moving), rather than that the command is wrong.
func isTransient(msg string) bool {
	for _, p := range []string{"LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "OOM", "MOVED ", "ASK "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// HashTag returns the part of a budget key (an issuer, then the path of
// delegations under it) that decides which Redis Cluster shard holds it:
// the issuer, so that one delegation tree lives on one shard and a script
// may touch all of its levels. Braces in it are dropped, since a brace
// would end the tag early.
func HashTag(key string) string {
	issuer, _, _ := strings.Cut(key, "/")
	if !strings.ContainsAny(issuer, "{}") {
		return issuer
	}
	return braces.Replace(issuer)
}

// braces drops braces; a Replacer is built once, since building one costs
// kilobytes.
var braces = strings.NewReplacer("{", "", "}", "")

// Address returns the canonical address of the store at rawURL:
// HOST:PORT/DB with the host in lower case (an IP address in its
// shortest form), the port 6379 and the database 0 when left out, without
// scheme, user, password or parameters; a cluster's seeds sorted, joined
// by commas. A URL that does not parse is its host and path as written.
func Address(rawURL string) string {
	if IsCluster(rawURL) {
		_, rest, _ := strings.Cut(rawURL, "://")
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			rest = rest[i+1:]
		}
		var seeds []string
		for _, h := range strings.Split(rest, ",") {
			o, err := redis.ParseURL("redis://" + h)
			if err != nil {
				seeds = append(seeds, strings.ToLower(h))
				continue
			}
			seeds = append(seeds, canonHostPort(o.Addr))
		}
		slices.Sort(seeds)
		return strings.Join(slices.Compact(seeds), ",") + "/0"
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		if u, err := url.Parse(rawURL); err == nil {
			return strings.ToLower(u.Host) + u.Path
		}
		return rawURL
	}
	return canonHostPort(o.Addr) + "/" + strconv.Itoa(o.DB)
}

// canonHostPort returns HOST:PORT with the host in lower case, an IP
// address in its shortest form.
func canonHostPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	host = strings.ToLower(host)
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return net.JoinHostPort(host, port)
}

// CanonicalStateName returns the file name, in a state directory, of
// what a machine keeps about the store at rawURL, named by its canonical
// address (Address), so that every spelling of one database of one server
// (the default port or database left out, a trailing slash, the host's
// case, a cluster's seeds in another order) names one file: "redis-", a
// hash of the address, and suffix.
func CanonicalStateName(rawURL, suffix string) string {
	sum := sha256.Sum256([]byte("store " + Address(rawURL)))
	return "redis-" + hex.EncodeToString(sum[:8]) + suffix
}

// StateName returns the file name, in a state directory, of what a
// machine keeps about the store at rawURL: "redis-", a hash of the URL's
// host (in lower case) and path (its database), and suffix; not its
// password or parameters, so that the same store named with another
// password or timeout finds the same file.
func StateName(rawURL, suffix string) string {
	where := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		where = strings.ToLower(u.Host) + u.Path
	}
	sum := sha256.Sum256([]byte(where))
	return "redis-" + hex.EncodeToString(sum[:8]) + suffix
}
