// Package redisset keeps a process's copy of a set of entries stored in a
// Redis hash, current within a second: every write to the hash is
// published on a channel in the same script, each copy is subscribed to
// it, and a copy reads the whole hash again each time its subscription is
// (re)made, so that what it missed while disconnected is read before it
// answers again.
//
// A copy answers only while it is current: it pings Redis every
// pingEvery on the subscription's connection, and when no pong has come
// back for a ping sent within StaleAfter (a pong arriving late speaks for
// when its ping was sent, not for when it arrived), or its subscription
// has broken and the hash has not been read again since, every Get fails
// with an error matching redisconn.ErrUnavailable. It never answers from a
// copy that may have missed a write.
//
// What is read from Redis is untrusted: Check is given every entry before
// it is kept, and an entry it refuses makes the copy fail until the entry
// is removed from Redis (as a list file that does not verify does).
package redisset

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// StaleAfter is how long a copy answers after the moment Redis's last
// answer speaks for: when the ping it answers was sent, or the hash read
// was asked for.
const StaleAfter = time.Second

// pingEvery is how often a copy asks Redis for a sign of life.
const pingEvery = 250 * time.Millisecond

// maxPings bounds the pings a copy remembers while their pongs are late.
const maxPings = 64

// maxBackoff bounds the wait between attempts to subscribe again.
const maxBackoff = 2 * time.Second

// MaxEntries bounds the entries a copy holds: a hash that grows past it
// is refused, as an error, rather than read into memory without bound.
const MaxEntries = 1 << 20

// errRefused is wrapped by the errors of a copy that read what it refuses
// to keep: Redis answered, and what it holds must be repaired.
var errRefused = errors.New("refused")

// A Copy is one process's current copy of a Redis hash. It is safe for
// concurrent use.
type Copy struct {
	what    string // for messages: "revocation list redis://..."
	c       redisconn.Client
	hash    string
	channel string
	check   func(field, value string) error
	ctx     context.Context
	stop    context.CancelFunc
	done    chan struct{}
	// OnAdd, when set before the first entry arrives, is told of each entry
	// kept, once.
	onAdd func(field, value string)
	// writeBack: entries the copy holds and the hash lacks are written
	// back to it (see Options.WriteBack).
	writeBack bool
	restored  func(fields []string)

	guarded chan struct{} // closed when guard returns

	mu      sync.Mutex
	entries map[string]string
	synced  bool      // the hash has been read since the subscription was last made
	heard   time.Time // the copy holds everything Redis held at this time
	err     error     // why the copy cannot answer, if it cannot
	changed chan struct{}
}

// Options configure Open.
type Options struct {
	// What names the store in messages.
	What string
	// Hash is the Redis key of the hash, Channel the channel its writes
	// are published on.
	Hash, Channel string
	// Check is given every entry read from Redis; an error refuses it.
	Check func(field, value string) error
	// OnAdd, when set, is told of every entry kept, once.
	OnAdd func(field, value string)
	// Seed are entries the copy holds before it first reads the hash (a
	// durable copy kept on disk), each checked as one read from Redis.
	Seed map[string]string
	// WriteBack makes the hash grow-only as the fleet sees it: a copy
	// never drops an entry, and every entry it holds that the hash lacks
	// (a FLUSHALL, a restart without persistence, a failover to a replica
	// that had not received it) is written back, with the same script
	// that adds one, each time the hash is read: when the subscription is
	// (re)made, and whenever the hash's length is found to differ from
	// the copy's (HLEN, every pingEvery).
	WriteBack bool
	// Restored, when set, is told of the fields each write-back restored.
	Restored func(fields []string)
}

// Open subscribes to the channel, reads the hash and keeps the copy
// current until Close. It waits up to wait for the first read, and
// returns its error (matching redisconn.ErrUnavailable when Redis did not
// answer) if it did not succeed.
func Open(c redisconn.Client, o Options, wait time.Duration) (*Copy, error) {
	ctx, stop := context.WithCancel(context.Background())
	s := &Copy{
		what: o.What, c: c, hash: o.Hash, channel: o.Channel, check: o.Check, onAdd: o.OnAdd,
		writeBack: o.WriteBack, restored: o.Restored,
		ctx: ctx, stop: stop, done: make(chan struct{}), entries: map[string]string{},
		err: &redisconn.UnavailableError{What: o.What, Err: errors.New("not read yet")}, changed: make(chan struct{}),
	}
	for k, v := range o.Seed {
		if err := s.keep(k, v); err != nil {
			stop()
			return nil, err
		}
	}
	s.mu.Lock()
	s.err = &redisconn.UnavailableError{What: o.What, Err: errors.New("not read yet")}
	s.mu.Unlock()
	go s.run()
	if s.writeBack {
		s.guarded = make(chan struct{})
		go s.guard()
	}
	deadline := time.After(wait)
	for {
		s.mu.Lock()
		err, synced, ch := s.err, s.synced, s.changed
		s.mu.Unlock()
		if synced && err == nil {
			return s, nil
		}
		if errors.Is(err, errRefused) {
			s.Close()
			return nil, err
		}
		select {
		case <-ch:
		case <-deadline:
			s.Close()
			return nil, err
		}
	}
}

// Get returns the value of field, if the copy holds it, or an error when
// the copy is not current.
func (s *Copy) Get(field string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.currentLocked(); err != nil {
		return "", false, err
	}
	v, ok := s.entries[field]
	return v, ok, nil
}

// Err returns nil when the copy is current, else why it is not.
func (s *Copy) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.currentLocked()
}

func (s *Copy) currentLocked() error {
	switch {
	case s.err != nil:
		return s.err
	case !s.synced:
		return &redisconn.UnavailableError{What: s.what, Err: errors.New("reconnecting")}
	}
	if since := time.Since(s.heard); since > StaleAfter {
		return &redisconn.UnavailableError{What: s.what, Err: fmt.Errorf("no answer from Redis for %v", since.Round(time.Millisecond))}
	}
	return nil
}

// Entries calls f with every entry of a current copy.
func (s *Copy) Entries(f func(field, value string)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.currentLocked(); err != nil {
		return err
	}
	for k, v := range s.entries {
		f(k, v)
	}
	return nil
}

// Reload reads the whole hash now, so that a write this process made is
// in the copy when Reload returns.
func (s *Copy) Reload() error {
	return s.load()
}

// Close stops keeping the copy current. It does not close the client.
func (s *Copy) Close() error {
	s.stop()
	<-s.done
	if s.guarded != nil {
		<-s.guarded
	}
	return nil
}

// guard reads the hash's length every pingEvery and, when it holds fewer
// entries than the copy (it lost some: the copy never drops one), reads
// it again, which writes the missing ones back; when it holds more (an
// entry written without its announcement reaching this copy: written by
// hand, or by a script whose PUBLISH was refused), it reads it again too.
// Errors are left to the subscription's pings, which decide whether the
// copy is current.
func (s *Copy) guard() {
	defer close(s.guarded)
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.c.HLen(s.ctx, s.hash).Result()
		if err != nil {
			continue
		}
		s.mu.Lock()
		held := int64(len(s.entries))
		s.mu.Unlock()
		if n != held {
			s.load()
		}
	}
}

// addScript sets field to value unless the hash has it (HSETNX), and
// announces the field. KEYS[1] is the hash; ARGV the channel, the field
// and the value. It returns 1 when it wrote.
//
// The announcement comes first, and is made even when the hash has the
// field: a PUBLISH the server refuses (an ACL user without the channel)
// then fails the script before anything is written, instead of leaving
// an entry in the hash that no copy was told of, and a second run (which
// would find the field and write nothing) announces it too.
var addScript = redis.NewScript(`
redis.call('PUBLISH', ARGV[1], ARGV[2])
return redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3])
`)

// Add writes an entry to the hash and publishes it, unless the hash has
// the field already; added reports whether it wrote. The copies learn of
// it from the channel.
func Add(ctx context.Context, c redis.Scripter, hash, channel, field, value, what string) (added bool, err error) {
	n, err := addScript.Run(ctx, c, []string{hash}, channel, field, value).Int()
	if err != nil {
		return false, redisconn.Unavailable(what, err)
	}
	return n == 1, nil
}

// run keeps the copy current until Close.
func (s *Copy) run() {
	defer close(s.done)
	backoff := 50 * time.Millisecond
	for s.ctx.Err() == nil {
		loaded, err := s.subscribe()
		if s.ctx.Err() != nil {
			return
		}
		if loaded {
			// It worked for a while: the next outage starts backing off
			// afresh.
			backoff = 50 * time.Millisecond
		}
		if !errors.Is(err, errRefused) {
			err = &redisconn.UnavailableError{What: s.what, Err: err}
		}
		s.setErr(err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// subscribe makes one subscription and serves it until it breaks, and
// reports whether it read the hash.
func (s *Copy) subscribe() (loaded bool, err error) {
	ps := s.c.Subscribe(s.ctx)
	defer ps.Close()
	if err := ps.Subscribe(s.ctx, s.channel); err != nil {
		return false, err
	}
	lastPing := time.Time{}
	// The pings in flight, oldest first, with when each was sent: a pong
	// (they come in order) tells what Redis held then, however late it
	// arrives.
	type ping struct {
		payload string
		at      time.Time
	}
	var seq uint64
	var sent []ping
	for s.ctx.Err() == nil {
		if time.Since(lastPing) >= pingEvery {
			seq++
			payload := strconv.FormatUint(seq, 10)
			lastPing = time.Now()
			if len(sent) >= maxPings {
				sent = sent[1:]
			}
			sent = append(sent, ping{payload, lastPing})
			if err := ps.Ping(s.ctx, payload); err != nil {
				return loaded, err
			}
		}
		msg, err := ps.ReceiveTimeout(s.ctx, pingEvery)
		var ne net.Error
		switch {
		case err != nil && errors.As(err, &ne) && ne.Timeout():
			continue // pinged again; silence ages the copy
		case err != nil:
			return loaded, err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			// Made or made again: what was published meanwhile is only in
			// the hash.
			s.mu.Lock()
			s.synced = false
			s.mu.Unlock()
			if err := s.load(); err != nil {
				return loaded, err
			}
			loaded = true
		case *redis.Pong:
			for i, p := range sent {
				if p.payload == m.Payload {
					s.heardAt(p.at)
					sent = sent[i+1:]
					break
				}
			}
		case *redis.Message:
			if err := s.fetch(m.Payload); err != nil {
				return loaded, err
			}
		}
	}
	return loaded, s.ctx.Err()
}

// load reads the whole hash into the copy and marks it synced.
func (s *Copy) load() error {
	// The hash read tells what Redis held when it was asked, not when it
	// answered.
	asked := time.Now()
	all, err := s.c.HGetAll(s.ctx, s.hash).Result()
	if err != nil {
		return redisconn.Unavailable(s.what, err)
	}
	if len(all) > MaxEntries {
		err := fmt.Errorf("%w: %s holds %d entries, over the limit of %d", errRefused, s.what, len(all), MaxEntries)
		s.setErr(err)
		return err
	}
	for k, v := range all {
		if err := s.keep(k, v); err != nil {
			return err
		}
	}
	if s.writeBack {
		if err := s.restore(all); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.synced, s.err = true, nil
	if asked.After(s.heard) {
		s.heard = asked
	}
	s.signalLocked()
	s.mu.Unlock()
	return nil
}

// restore writes back every entry the copy holds that all, the hash as
// just read, lacks.
func (s *Copy) restore(all map[string]string) error {
	s.mu.Lock()
	var missing []string
	for k := range s.entries {
		if _, ok := all[k]; !ok {
			missing = append(missing, k)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	for _, k := range missing {
		s.mu.Lock()
		v := s.entries[k]
		s.mu.Unlock()
		if _, err := Add(s.ctx, s.c, s.hash, s.channel, k, v, s.what); err != nil {
			return err
		}
	}
	if s.restored != nil {
		s.restored(missing)
	}
	return nil
}

// fetch reads the entry a message names: the message carries the field
// only, and the hash holds what was written, so a message cannot make a
// copy hold what Redis does not. A message does not make the copy current:
// it may have been published long before it arrived; pongs do.
func (s *Copy) fetch(field string) error {
	v, err := s.c.HGet(s.ctx, s.hash, field).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return redisconn.Unavailable(s.what, err)
	}
	return s.keep(field, v)
}

// Hold adds an entry this process wrote to the hash itself (with Add),
// unless the copy holds the field already: the writer's copy holds what
// it wrote at once, not only once its own PUBLISH comes back and the
// entry is read again — the hash may lose it in between (a FLUSHALL), and
// then only a copy holding it writes it back.
func (s *Copy) Hold(field, value string) error {
	s.mu.Lock()
	_, had := s.entries[field]
	s.mu.Unlock()
	if had {
		return nil
	}
	return s.keep(field, value)
}

// keep checks an entry and adds it to the copy, or records the refusal.
func (s *Copy) keep(field, value string) error {
	s.mu.Lock()
	old, had := s.entries[field]
	s.mu.Unlock()
	if had && old == value {
		return nil
	}
	if err := s.check(field, value); err != nil {
		err = fmt.Errorf("%w: %s holds an entry that does not verify (%q): %w; remove it from Redis", errRefused, s.what, clip(field), err)
		s.setErr(err)
		return err
	}
	s.mu.Lock()
	if _, had := s.entries[field]; !had && len(s.entries) >= MaxEntries {
		s.mu.Unlock()
		err := fmt.Errorf("%w: %s holds over %d entries", errRefused, s.what, MaxEntries)
		s.setErr(err)
		return err
	}
	s.mu.Unlock()
	// Told before the entry counts as kept, so that what OnAdd builds is
	// never behind the copy.
	if s.onAdd != nil {
		s.onAdd(field, value)
	}
	s.mu.Lock()
	s.entries[field] = value
	s.mu.Unlock()
	return nil
}

// heardAt records that the copy held everything Redis held at t.
func (s *Copy) heardAt(t time.Time) {
	s.mu.Lock()
	if t.After(s.heard) {
		s.heard = t
	}
	s.signalLocked()
	s.mu.Unlock()
}

func (s *Copy) setErr(err error) {
	s.mu.Lock()
	s.err, s.synced = err, false
	s.signalLocked()
	s.mu.Unlock()
}

// signalLocked wakes Open's waiting.
func (s *Copy) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// clip shortens a field for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
