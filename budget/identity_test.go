package budget

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	s, err := OpenRedisIn(srv.URL(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	s, err := OpenRedisIn(srv.URL(), dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(levels, 100)
	if err != nil {
		t.Fatal(err)
	}
	s.Commit(r, 100)
	s.Close()
	if err := srv.Client().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenRedisIn(srv.URL(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Reserve(levels, 100); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("a reservation after the flush: %v, want ErrReset", err)
	}
	// Another proxy, with no state of its own, sees the mark.
	other, err := OpenRedisIn(srv.URL(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Reserve(levels, 100); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("another proxy's reservation after the flush: %v, want ErrReset", err)
	}
	// The operator accepts the loss: both go on, without a restart.
	if _, err := InitStore(srv.URL(), true); err != nil {
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
