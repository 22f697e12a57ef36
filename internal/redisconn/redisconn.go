// Package redisconn opens the Redis connections the shared stores use (a
// spend store, a revocation list or an ended-delegation set named by a
// redis:// or rediss:// URL), and names the error every store returns when
// Redis cannot answer.
//
// A client never retries a command more than once (OpenOnce's never
// does), and waits at most Timeout for each reply, so a call that needs
// Redis is refused within a bounded time when Redis is down or stalled. The pool reconnects by
// itself: after repeated dial failures it waits (backing off) before
// dialling again, and each command meanwhile fails fast.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
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

// IsURL reports whether s names a Redis store rather than a file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "redis://") || strings.HasPrefix(s, "rediss://")
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
	if !IsURL(rawURL) {
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

// Open returns a client for the URL. It does not connect: the first
// command does, and fails with the connection's error.
func Open(rawURL string) (*redis.Client, error) {
	o, err := Options(rawURL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(o), nil
}

// OpenOnce is Open for a client that never retries a command, whatever
// the URL says: a script that takes something (a rate-limit slot) may
// have run when its reply timed out, and a retry, on another connection,
// would run it again. A command that fails is the caller's to refuse.
func OpenOnce(rawURL string) (*redis.Client, error) {
	o, err := Options(rawURL)
	if err != nil {
		return nil, err
	}
	o.MaxRetries = -1
	return redis.NewClient(o), nil
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
	return &UnavailableError{What: what, Err: err}
}

// isTransient reports whether a reply from Redis says it cannot serve
// now (loading its data, a replica cut off, a busy script), rather than
// that the command is wrong.
func isTransient(msg string) bool {
	for _, p := range []string{"LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "OOM", "MOVED", "ASK "} {
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
