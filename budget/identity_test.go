package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// A store written before stores had identities (spend keys, no identity,
// no stamps) is adopted as it is at the upgrade: its spend goes on from
// what it holds, and it is not taken for a store that lost data.
func TestRedisIdentityAdoptsAStoreFromBefore(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	levels := []Level{{"ISSUER/1:a", 1000}}
	if err := srv.Client().HSet(ctx, spendKey(levels[0].Key), "c", 900, "n", 9, "t", 1).Err(); err != nil {
		t.Fatal(err)
	}
	s := openRedisIn(t, srv.URL(), t.TempDir())
	r, err := s.Reserve(levels, 100)
	if err != nil {
		t.Fatalf("a reservation on a store from before identities: %v", err)
	}
	s.Commit(r, 100)
	if _, err := s.Reserve(levels, 1); !errors.Is(err, ErrExceeded) {
		t.Fatalf("the budget's last microcent: %v, want it exceeded (the old spend kept)", err)
	}
}

// A proxy remembers the store's identity in its state directory: one
// restarted after the store was flushed is in the reset state from its
// start, and the store is marked reset for every other.
func TestRedisIdentityRememberedAcrossRestarts(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	levels := []Level{{"ISSUER/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), dir)
	s.Commit(mustReserve(t, s, levels, 100), 100)
	s.Close()
	srv.FlushAll()
	s = openRedisIn(t, srv.URL(), dir)
	if _, err := s.Reserve(levels, 100); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("a reservation after the flush: %v, want ErrReset", err)
	}
	// Another proxy, with no state of its own, sees the mark.
	other := openRedisIn(t, srv.URL(), t.TempDir())
	if _, err := other.Reserve(levels, 100); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("another proxy's reservation after the flush: %v, want ErrReset", err)
	}
	// The operator accepts the loss: both go on, without a restart.
	if _, err := InitStore(srv.URL(), StateDir(), true); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Redis{s, other} {
		r, err := st.Reserve(levels, 100)
		if err != nil {
			t.Fatalf("after store init --reset: %v", err)
		}
		st.Release(r)
	}
}

// A state directory the proxy cannot write stops it (fail closed): a
// restart would not notice a loss, nor a store gone back to an older
// snapshot.
func TestRedisIdentityStateDirNotWritable(t *testing.T) {
	srv := redistest.Start(t)
	dir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenRedisIn(srv.URL(), dir)
	if err == nil {
		s.Close()
		t.Fatal("a state directory that is a file was accepted")
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "DELEGATEOS_STATE_DIR") {
		t.Fatalf("the error does not name the directory and the variable: %v", err)
	}
}

// The counts a state directory keeps under an earlier generation are
// dropped for the trees an operator lifted since: every tree's at store
// init --reset, one root's at store recover. A proxy restarted after an
// init --reset and a later recovery of another root is not refused for
// a count its tree had before the init accepted its loss, and one whose
// tree no recovery rebuilt still is.
func TestRedisIdentityCountsKeptAcrossLifts(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := srv.Client()
	r1, r2 := []Level{{"R1/1:a", 1000}}, []Level{{"R2/1:b", 1000}}
	spend := func(s *Redis, levels []Level, n int) {
		t.Helper()
		for range n {
			s.Commit(mustReserve(t, s, levels, 1), 1)
		}
	}
	open := func(dir string) *Redis {
		t.Helper()
		return openRedisIn(t, srv.URL(), dir)
	}
	old, other := t.TempDir(), t.TempDir()
	s := open(old)
	spend(s, r1, 5)
	spend(s, r2, 5)
	s.Close() // old keeps R2 at 5 calls, under the first generation
	// R2's tree is lost, found, and the loss accepted.
	if err := c.Del(ctx, spendKey(r2[0].Key), stampKey(r2[0].Key)).Err(); err != nil {
		t.Fatal(err)
	}
	s = open(other)
	if _, err := s.Reserve(r2, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("R2 after its keys were deleted: %v, want ErrReset", err)
	}
	if _, err := InitStore(srv.URL(), StateDir(), true); err != nil {
		t.Fatal(err)
	}
	spend(s, r2, 1)
	spend(s, r1, 1)
	// R1's tree alone is lost, found, and rebuilt.
	if err := c.Del(ctx, spendKey(r1[0].Key), stampKey(r1[0].Key)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(r1, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("R1 after its keys were deleted: %v, want ErrReset", err)
	}
	s.Close()
	if _, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: r1[0].Key, Committed: 1, Calls: 1}}); err != nil {
		t.Fatal(err)
	}
	s = open(old)
	defer s.Close()
	if r, err := s.Reserve(r2, 1); err != nil {
		t.Fatalf("R2, whose 5 calls the init --reset accepted as lost, on the machine that saw them: %v", err)
	} else {
		s.Commit(r, 1)
	}
	// And a tree no operator lifted since the counts were kept: R2 lost
	// again, R1 recovered, R2's count kept.
	s.Close()
	if err := c.Del(ctx, spendKey(r2[0].Key), stampKey(r2[0].Key)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, identityKey, "reset", "test").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: r1[0].Key, Committed: 1, Calls: 1}}); err != nil {
		t.Fatal(err)
	}
	s2 := open(old)
	defer s2.Close()
	if _, err := s2.Reserve(r2, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("R2 lost and not rebuilt, on the machine that saw it: %v, want ErrReset", err)
	}
}

// A proxy that finds no state directory at all says so at start.
func TestRedisOpenWithoutStateDirWarns(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv("DELEGATEOS_STATE_DIR", "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "")
	st, err := Open(srv.URL(), StateDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := st.(*Redis).Warnings()
	if len(w) == 0 || !strings.Contains(w[len(w)-1], "no state directory") {
		t.Fatalf("warnings %q", w)
	}
}

// The counts a machine keeps are named by the store's identity, not the
// URL's spelling: a proxy that names the same server another way
// (localhost for 127.0.0.1) finds a store gone back to an older snapshot
// too (R2-3).
func TestRedisCountsKeptWhateverTheURLsSpelling(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	levels := []Level{{"ISSUER/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), dir)
	for range 5 {
		s.Commit(mustReserve(t, s, levels, 1), 1)
	}
	s.Close()
	// Back on a snapshot of 2 calls (the identity is kept).
	if err := srv.Client().HSet(context.Background(), spendKey(levels[0].Key), "n", 2, "c", 2).Err(); err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(srv.URL(), "127.0.0.1", "localhost", 1)
	if other == srv.URL() {
		t.Fatalf("the URL %s has no 127.0.0.1", srv.URL())
	}
	s = openRedisIn(t, other, dir)
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), "fewer than the 5 this proxy saw") {
		t.Fatalf("a reservation through another spelling of the URL after the store went back: %v, want ErrReset", err)
	}
}

// A counts file that is gone while the state directory's index says it
// was written was deleted: the proxy refuses to start (R2-1), until an
// operator accepts the loss with store init --reset.
func TestRedisDeletedCountsFileRefused(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	levels := []Level{{"ISSUER/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), dir)
	s.Commit(mustReserve(t, s, levels, 1), 1)
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "store-*.seen.json"))
	if len(files) != 1 {
		t.Fatalf("counts files %v, want one", files)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenRedisIn(srv.URL(), dir); err == nil {
		s.Close()
		t.Fatal("a proxy started on a state directory whose counts file was deleted")
	} else if !strings.Contains(err.Error(), files[0]) || !strings.Contains(err.Error(), "is gone (deleted)") || !strings.Contains(err.Error(), "store init --reset") {
		t.Fatalf("the refusal does not name the file and what to run: %v", err)
	}
	if _, err := InitStore(srv.URL(), StateDir(), true); err != nil {
		t.Fatal(err)
	}
	s, err := OpenRedisIn(srv.URL(), dir)
	if err != nil {
		t.Fatalf("after store init --reset accepted the loss: %v", err)
	}
	s.Close()
	// A machine that made no calls has a counts file too.
	fresh := t.TempDir()
	s = openRedisIn(t, srv.URL(), fresh)
	s.Close()
	if files, _ := filepath.Glob(filepath.Join(fresh, "store-*.seen.json")); len(files) != 1 {
		t.Fatalf("a machine that made no calls: counts files %v, want one", files)
	}
}

// Proxies of one machine write their counts to one file, each merging
// what the others wrote, under the file's lock: a write waits for the
// lock, and keeps what was written while it waited (R2-2).
func TestRedisCountsWriteHoldsTheLock(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	s := openRedisIn(t, srv.URL(), dir)
	s.mu.Lock()
	id := s.ident
	s.seen = map[string]int64{"A/1:a": 5}
	s.mu.Unlock()
	path := s.seenPath(id.ID)
	lock, err := lockWait(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.storeSeen(false) }()
	// Another proxy's write, made while it holds the lock.
	b, _ := json.Marshal(seenState{ID: id.ID, Gen: id.Gen, Seen: map[string]int64{"B/1:b": 7}})
	if err := writeFileAtomic(path, b); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st, err := s.readSeenFile(id.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Seen["A/1:a"] != 5 || st.Seen["B/1:b"] != 7 {
		t.Fatalf("the counts file holds %v, want both proxies' counts", st.Seen)
	}
}

// A loss found at one tree marks that tree only (R2-5): a proxy started
// afterwards takes another tree's calls, refuses the lost tree's naming
// its root, and store init --reset --root lifts it (its spend keys that
// are gone included).
func TestRedisTreeLossMarksOnlyTheTree(t *testing.T) {
	srv := redistest.Start(t)
	r1, r2 := []Level{{"R1/1:a", 1000}}, []Level{{"R2/1:b", 1000}}
	s := openRedisIn(t, srv.URL(), t.TempDir())
	for _, l := range [][]Level{r1, r2} {
		s.Commit(mustReserve(t, s, l, 1), 0) // committed before it returns
	}
	if err := srv.Client().Del(context.Background(), spendKey(r1[0].Key)).Err(); err != nil {
		t.Fatal(err)
	}
	var re *ResetError
	if _, err := s.Reserve(r1, 1); !errors.As(err, &re) || re.Root != "R1" || !strings.Contains(err.Error(), "--reset --root R1") {
		t.Fatalf("R1 after its spend key was deleted: %v, want a ResetError of root R1", err)
	}
	other := openRedisIn(t, srv.URL(), t.TempDir())
	for _, st := range []*Redis{s, other} {
		r, err := st.Reserve(r2, 1)
		if err != nil {
			t.Fatalf("R2 (intact) after R1's loss was found: %v", err)
		}
		st.Commit(r, 1)
		if _, err := st.Reserve(r1, 1); !errors.Is(err, redisconn.ErrReset) {
			t.Fatalf("R1 after its loss was found: %v, want ErrReset", err)
		}
	}
	if _, err := InitStore(srv.URL(), StateDir(), true, "R1"); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Redis{s, other} {
		r, err := st.Reserve(r1, 1)
		if err != nil {
			t.Fatalf("R1 after store init --reset --root R1: %v", err)
		}
		st.Commit(r, 1)
	}
}

// store recover keeps the counts the proxies saw (R2-6): a rebuild from
// fewer calls than a proxy saw (an audit log left out) is refused by it,
// saying to give every proxy's log, and a rebuild with them all lifts it.
func TestRedisRecoverKeepsTheCountsSeen(t *testing.T) {
	srv := redistest.Start(t)
	levels := []Level{{"R1/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), t.TempDir())
	for range 5 {
		r, err := s.Reserve(levels, 1)
		if err != nil {
			t.Fatal(err)
		}
		// At another cost than reserved: committed before Commit
		// returns, not by the flusher after the key is deleted (or
		// rebuilt).
		s.Commit(r, 0)
	}
	if err := srv.Client().Del(context.Background(), spendKey(levels[0].Key)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("after the spend key was deleted: %v, want ErrReset", err)
	}
	if _, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: levels[0].Key, Committed: 3, Calls: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), "fewer than the 5 this proxy saw") || !strings.Contains(err.Error(), "audit logs of every proxy") {
		t.Fatalf("after a recovery from 3 of the 5 calls: %v, want ErrReset saying to give every proxy's log", err)
	}
	if _, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: levels[0].Key, Committed: 5, Calls: 5}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(levels, 1)
	if err != nil {
		t.Fatalf("after a recovery from the 5 calls: %v", err)
	}
	s.Commit(r, 1)
}

// An operator's generation does not depend on the operator's clock (R2-7):
// a store made by a proxy whose clock runs ahead, flushed, and given a
// generation by an operator behind it before any proxy noticed, is refused
// by the proxies, which record the generation they saw; the operator's
// next init --reset is after it. An operator on a machine whose state
// directory saw the store gets a generation after it at once.
func TestRedisOperatorClockBehind(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := srv.Client()
	levels := []Level{{"ISSUER/1:a", 1000}}
	for _, sameMachine := range []bool{false, true} {
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		ahead := time.Now().Add(time.Hour).UnixMilli()
		if err := c.HSet(ctx, identityKey, "id", "0123456789abcdef01234567", "g", ahead, "by", "proxy").Err(); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		s := openRedisIn(t, srv.URL(), dir)
		s.Commit(mustReserve(t, s, levels, 1), 0)
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if sameMachine {
			t.Setenv("DELEGATEOS_STATE_DIR", dir)
		} else {
			t.Setenv("DELEGATEOS_STATE_DIR", t.TempDir())
		}
		id, err := InitStore(srv.URL(), StateDir(), true)
		if err != nil {
			t.Fatal(err)
		}
		if !sameMachine {
			if id.Gen >= ahead {
				t.Fatalf("generation %d from an empty store and an operator with no state, want the operator's clock", id.Gen)
			}
			if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), fmt.Sprintf("a proxy saw generation %d", ahead)) {
				t.Fatalf("after an operator's generation before the proxy's: %v, want ErrReset naming generation %d", err, ahead)
			}
			if id, err = InitStore(srv.URL(), StateDir(), true); err != nil {
				t.Fatal(err)
			}
		}
		if id.Gen <= ahead {
			t.Fatalf("same machine %v: the operator's generation %d, want one after the proxy's %d", sameMachine, id.Gen, ahead)
		}
		r, err := s.Reserve(levels, 1)
		if err != nil {
			t.Fatalf("same machine %v: after store init --reset: %v", sameMachine, err)
		}
		s.Commit(r, 0)
	}
}

// A proxy that found a loss goes on writing the counts it saw (R3-8):
// the raises of the last second before it found the loss, which the
// timer's write had not yet written, are written at Close, reset state
// or not. The counts file's lock is held from before the first raise
// until the loss is found, so that the background writes cannot have
// written them first.
func TestRedisCountsWrittenInTheResetState(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	levels := []Level{{"ISSUER/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), dir)
	files, _ := filepath.Glob(filepath.Join(dir, "store-*.seen.json"))
	if len(files) != 1 {
		t.Fatalf("counts files %v, want one", files)
	}
	lock, err := lockWait(files[0] + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		r, err := s.Reserve(levels, 1)
		if err != nil {
			lock.Close()
			t.Fatal(err)
		}
		s.Commit(r, 1)
	}
	if err := srv.Client().FlushAll(context.Background()).Err(); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) {
		lock.Close()
		t.Fatalf("a reservation after FLUSHALL: %v, want ErrReset", err)
	}
	lock.Close()
	s.Close()
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var st seenState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	var most int64
	for _, n := range st.Seen {
		most = max(most, n)
	}
	if most != 5 {
		t.Fatalf("the counts file after a clean exit in the reset state: %s; want the 5 calls seen", b)
	}
}

// The spellings of one database of one server name one index of the
// identity a machine saw there (R3-1): the default database or port left
// out, a trailing slash, the host's case, a cluster's seeds in another
// order.
func TestStoreAddressCanonical(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"redis://127.0.0.1:7000/0", "redis://127.0.0.1:7000"},
		{"redis://127.0.0.1:7000/0", "redis://127.0.0.1:7000/"},
		{"redis://127.0.0.1:7000/0", "rediss://user:secret@127.0.0.1:7000/0?dial_timeout=3s"},
		{"redis://127.0.0.1/0", "redis://127.0.0.1:6379/0"},
		{"redis://Redis.Example:6379/2", "redis://redis.example:6379/2"},
		{"redis://127.0.0.1:7000/3", "redis://127.0.0.1:7000?db=3"},
		{"redis://[::1]:7000/0", "redis://[0:0:0:0:0:0:0:1]:7000"},
		{"redis+cluster://127.0.0.1:7000,127.0.0.1:7001/0", "redis+cluster://127.0.0.1:7001,127.0.0.1:7000"},
	} {
		if a, b := storeAddress(c.a), storeAddress(c.b); a != b || indexName(c.a) != indexName(c.b) {
			t.Errorf("%s is %s, %s is %s: want one address", c.a, a, c.b, b)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"redis://127.0.0.1:7000/0", "redis://127.0.0.1:7000/1"},
		{"redis://127.0.0.1:7000/0", "redis://127.0.0.1:7001/0"},
	} {
		if storeAddress(c.a) == storeAddress(c.b) || sameServer(storeAddress(c.a), storeAddress(c.b)) {
			t.Errorf("%s and %s taken for one store", c.a, c.b)
		}
	}
	if !sameServer(storeAddress("redis://localhost:7000"), storeAddress("redis://127.0.0.1:7000/0")) {
		t.Errorf("localhost and 127.0.0.1 not taken for one server")
	}
}

// A store that lost its identity (FLUSHALL, a restart without
// persistence) is found by a proxy restarted on the machine that saw it,
// whatever the URL's spelling (R3-1): the index is named by the store's
// canonical address, and one written under another name of the server
// (localhost, its address) is found by the addresses it resolves to.
func TestRedisIdentityGoneFoundWhateverTheURLsSpelling(t *testing.T) {
	srv := redistest.Start(t)
	levels := []Level{{"ISSUER/1:a", 1000}}
	for _, other := range []string{
		strings.Replace(srv.URL(), "/0", "", 1),
		strings.Replace(strings.Replace(srv.URL(), "127.0.0.1", "localhost", 1), "/0", "/", 1),
	} {
		if other == srv.URL() || !strings.Contains(srv.URL(), "127.0.0.1") {
			t.Fatalf("the URL %s has no 127.0.0.1 or /0", srv.URL())
		}
		dir := t.TempDir()
		srv.FlushAll()
		s := openRedisIn(t, srv.URL(), dir)
		s.Commit(mustReserve(t, s, levels, 1), 1)
		s.Close()
		srv.FlushAll()
		s = openRedisIn(t, other, dir)
		_, err := s.Reserve(levels, 1)
		s.Close()
		if !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), "which this machine saw") {
			t.Fatalf("a reservation at %s after FLUSHALL of the store the machine saw at %s: %v, want ErrReset", other, srv.URL(), err)
		}
	}
}

// One root's store init --reset --root, after a loss of the whole store
// that a proxy found, lifts that root's tree only (R3-5): the store-wide
// mark holds for the rest, whose stamps the flush took, so that a new
// proxy of another tree is refused until an operator lifts that tree too
// (or every tree).
func TestRedisOneRootsInitKeepsTheStoreWideReset(t *testing.T) {
	srv := redistest.Start(t)
	r1 := []Level{{"R1/1:a", 1000}}
	r2 := []Level{{"R2/1:b", 1000}}
	s := openRedisIn(t, srv.URL(), t.TempDir())
	for _, l := range [][]Level{r1, r2} {
		s.Commit(mustReserve(t, s, l, 1), 1)
	}
	srv.FlushAll()
	if _, err := s.Reserve(r1, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("after FLUSHALL: %v, want ErrReset", err)
	}
	if _, err := InitStore(srv.URL(), StateDir(), true, "R1"); err != nil {
		t.Fatal(err)
	}
	fresh := func() *Redis {
		n := openRedisIn(t, srv.URL(), t.TempDir())
		t.Cleanup(func() { n.Close() })
		return n
	}
	n := fresh()
	if r, err := n.Reserve(r1, 1); err != nil {
		t.Fatalf("root R1's tree, lifted: %v", err)
	} else {
		n.Commit(r, 1)
	}
	if _, err := n.Reserve(r2, 1); !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), "--root R2") {
		t.Fatalf("root R2's tree, whose loss no one accepted, in a new proxy: %v, want ErrReset naming --root R2", err)
	}
	// Another root's lift keeps the mark for the rest; R2's lifts R2.
	if _, err := InitStore(srv.URL(), StateDir(), true, "R3"); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh().Reserve(r2, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("root R2's tree after R3's lift: %v, want ErrReset", err)
	}
	if _, err := InitStore(srv.URL(), StateDir(), true, "R2"); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh().Reserve(r2, 1); err != nil {
		t.Fatalf("root R2's tree after its lift: %v", err)
	}
	if _, err := fresh().Reserve([]Level{{"R4/1:c", 1000}}, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("a tree no lift named: %v, want ErrReset", err)
	}
	// Every tree's lift clears the mark.
	if _, err := InitStore(srv.URL(), StateDir(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh().Reserve([]Level{{"R4/1:c", 1000}}, 1); err != nil {
		t.Fatalf("after store init --reset: %v", err)
	}
}

// store recover on a store that lost its identity before any proxy
// noticed gives it a new one (R3-3): a proxy restarted on a machine that
// saw the store adopts it and keeps the counts the machine kept under the
// identity its index names, so a rebuild from fewer calls than it saw is
// refused.
func TestRedisRecoverOfAForgottenStoreKeepsTheCounts(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	levels := []Level{{"R1/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), dir)
	for range 5 {
		s.Commit(mustReserve(t, s, levels, 1), 1)
	}
	was := s.ident
	s.Close()
	srv.FlushAll()
	id, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: levels[0].Key, Committed: 2, Calls: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if id.ID == was.ID {
		t.Fatalf("the recovery kept the identity %s the store had lost", id.ID)
	}
	s = openRedisIn(t, srv.URL(), dir)
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), "fewer than the 5 this proxy saw") {
		t.Fatalf("a machine that saw 5 calls, after a rebuild of 2 on a store that lost its identity: %v, want ErrReset", err)
	}
}

// store init --reset --root on a store that lost its identity before any
// proxy noticed lifts that root's tree only (R3-3): another tree, whose
// stamp the loss took, is refused in a new machine's proxy until an
// operator lifts it too.
func TestRedisInitRootOfAForgottenStoreKeepsTheRest(t *testing.T) {
	srv := redistest.Start(t)
	r1 := []Level{{"R1/1:a", 1000}}
	r2 := []Level{{"R2/1:b", 1000}}
	s := openRedisIn(t, srv.URL(), t.TempDir())
	for _, l := range [][]Level{r1, r2} {
		s.Commit(mustReserve(t, s, l, 1), 1)
	}
	s.Close()
	srv.FlushAll()
	if _, err := InitStore(srv.URL(), StateDir(), true, "R1"); err != nil {
		t.Fatal(err)
	}
	n := openRedisIn(t, srv.URL(), t.TempDir())
	if _, err := n.Reserve(r1, 1); err != nil {
		t.Fatalf("root R1's tree, lifted: %v", err)
	}
	if _, err := n.Reserve(r2, 1); !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), "--root R2") {
		t.Fatalf("root R2's tree, whose loss no one accepted: %v, want ErrReset naming --root R2", err)
	}
}

// A running proxy whose tree's stamp names the identity an operator gave
// the store since (store recover on a store that lost its identity)
// adopts the operator's generation rather than mark the tree it just
// rebuilt (R3-6): a recovery from every log goes on.
func TestRedisRunningProxyAdoptsARecoveredTree(t *testing.T) {
	srv := redistest.Start(t)
	levels := []Level{{"R1/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), t.TempDir())
	for range 3 {
		r, err := s.Reserve(levels, 1)
		if err != nil {
			t.Fatal(err)
		}
		s.Release(r) // at once, not carried by a later reservation
	}
	srv.FlushAll()
	if _, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: levels[0].Key, Committed: 3, Calls: 3}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(levels, 1)
	if err != nil {
		t.Fatalf("the running proxy after a recovery from every log: %v", err)
	}
	s.Commit(r, 1)
	if reset, _ := srv.Client().HExists(context.Background(), stampKey(levels[0].Key), "reset").Result(); reset {
		t.Fatal("the recovered tree's stamp is marked reset again")
	}
}

// store init --reset --root with a root that names no tree of the store
// (a typo, another fleet's root) is refused, naming the trees marked
// reset, and changes nothing (R3-7).
func TestInitStoreUnknownRootRefused(t *testing.T) {
	srv := redistest.Start(t)
	levels := []Level{{"R1/1:a", 1000}}
	s := openRedisIn(t, srv.URL(), t.TempDir())
	r, err := s.Reserve(levels, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Release(r)
	ctx := context.Background()
	if err := srv.Client().Del(ctx, spendKey(levels[0].Key)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("after DEL of the tree's key: %v, want ErrReset", err)
	}
	before, _ := readIdentity(ctx, srv.Client())
	if _, err := InitStore(srv.URL(), StateDir(), true, "R9"); err == nil || !strings.Contains(err.Error(), "--root R9 names no delegation tree") || !strings.Contains(err.Error(), "R1") {
		t.Fatalf("store init --reset --root R9 (no such tree): %v, want refused naming R1", err)
	}
	if after, _ := readIdentity(ctx, srv.Client()); after.Gen != before.Gen {
		t.Fatalf("the refused init changed the generation %d to %d", before.Gen, after.Gen)
	}
	if _, err := InitStore(srv.URL(), StateDir(), true, "R1"); err != nil {
		t.Fatalf("store init --reset --root R1: %v", err)
	}
	if _, err := s.Reserve(levels, 1); err != nil {
		t.Fatalf("after store init --reset --root R1: %v", err)
	}
}

// A cut index of the store's identity refuses the open with a
// StateError (not Redis's) naming what to do with the file (R3-4).
func TestRedisCutIndexIsAStateError(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	s := openRedisIn(t, srv.URL(), dir)
	s.Close()
	idx := filepath.Join(dir, indexName(srv.URL()))
	if err := os.WriteFile(idx, []byte(`{"id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenRedisIn(srv.URL(), dir)
	var se *StateError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), idx) || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("open on a cut index: %v, want a StateError naming the file and its remedy", err)
	}
}

// A relative state directory given to Open is refused, as a relative
// DELEGATEOS_STATE_DIR is (before Redis is reached).
func TestOpenRelativeStateDirRefused(t *testing.T) {
	t.Setenv("DELEGATEOS_STATE_DIR", "")
	_, err := Open("redis://127.0.0.1:1/0", "state")
	var se *StateError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "relative path") {
		t.Fatalf("got %v", err)
	}
}
