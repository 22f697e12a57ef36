package budget

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

// heldAt reads the held cost of a budget key as Redis keeps it.
func heldAt(t *testing.T, srv *redistest.Server, key string) string {
	t.Helper()
	h, err := srv.Client().HGet(context.Background(), spendKey(key), "h").Result()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Only the tree's open-reservations hash is lost (DEL, eviction) while a
// reservation is open: its commit ends nothing, and its cost would stay
// held for ever. The next reservation finds cost held with no open
// reservation and refuses store_reset, naming the hash, at this proxy and
// at a proxy started later; store init --reset --root releases what the
// keys held for the lost reservations, and calls go on.
func TestRedisOpenReservationsLostIsReset(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	levels := []Level{{"ISSUER/del_root", 1000}, {"ISSUER/del_root/del_a", 500}}
	s, err := OpenRedisIn(srv.URL(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Commit(mustReserve(t, s, levels, 100), 100)
	r := mustReserve(t, s, levels, 100)
	if err := srv.Client().Del(ctx, openKey(levels[0].Key)).Err(); err != nil {
		t.Fatal(err)
	}
	s.Commit(r, 60) // finds no open reservation: ends nothing
	if h := heldAt(t, srv, levels[1].Key); h != "100" {
		t.Fatalf("held after the commit of a lost reservation: %s, want 100 (the test's premise)", h)
	}
	_, err = s.Reserve(levels, 100)
	if !errors.Is(err, redisconn.ErrReset) || !strings.Contains(err.Error(), openKey(levels[0].Key)) {
		t.Fatalf("a reservation after the open reservations were lost: %v; want ErrReset naming %s", err, openKey(levels[0].Key))
	}
	other, err := OpenRedisIn(srv.URL(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Reserve(levels, 100); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("a proxy started later: %v; want ErrReset", err)
	}
	if _, err := InitStore(srv.URL(), StateDir(), true, "ISSUER"); err != nil {
		t.Fatal(err)
	}
	for _, k := range levels {
		if h := heldAt(t, srv, k.Key); h != "0" {
			t.Fatalf("%s holds %s after store init --reset; want 0", k.Key, h)
		}
	}
	for _, st := range []*Redis{s, other} {
		r, err := st.Reserve(levels, 100)
		if err != nil {
			t.Fatalf("after store init --reset: %v", err)
		}
		st.Commit(r, 50)
	}
	waitSpent(t, s, levels[1].Key, 200)
}

// store recover releases what the keys held for the lost reservations
// before it rebuilds the spend, so the rebuilt spend is what the logs say,
// not that less what was held.
func TestRedisRecoverReleasesLostHeld(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	levels := []Level{{"ISSUER/del_root", 1000}}
	s, err := OpenRedisIn(srv.URL(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustReserve(t, s, levels, 300)
	srv.Client().Del(ctx, openKey(levels[0].Key))
	if _, err := s.Reserve(levels, 1); !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("%v, want ErrReset", err)
	}
	if _, err := RecoverStore(srv.URL(), StateDir(), []Usage{{Key: levels[0].Key, Committed: 300, Calls: 1}}); err != nil {
		t.Fatal(err)
	}
	m := srv.Client().HGetAll(ctx, spendKey(levels[0].Key)).Val()
	if m["h"] != "0" || m["c"] != "300" {
		t.Fatalf("after store recover: %v; want 300 committed (the log's), none held", m)
	}
	if _, err := s.Reserve(levels, 700); err != nil {
		t.Fatalf("the budget's remaining 700 after recover: %v", err)
	}
	if _, err := s.Reserve(levels, 1); !isExceeded(err) {
		t.Fatalf("past the budget after recover: %v, want exceeded", err)
	}
}

// Releasing held cost never goes below what the open reservations still
// in the hash hold: a key is lowered to their sum, not to zero; and a
// reservation's commit never leaves a held cost below zero (which every
// script would refuse to read, wedging the tree).
func TestRedisSettleHeldKeepsOpenReservations(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	levels := []Level{{"ISSUER/del_root", 1000}}
	s := openRedis(t, srv.URL())
	r1 := mustReserve(t, s, levels, 40)
	r2 := mustReserve(t, s, levels, 25)
	// Held above what is open (as after a loss of some of the hash).
	srv.Client().HSet(ctx, spendKey(levels[0].Key), "h", 500)
	if n, err := settleHeld(ctx, s.c, map[string]bool{"ISSUER": true}); err != nil || n != 1 {
		t.Fatalf("settleHeld = %d, %v", n, err)
	}
	if h := heldAt(t, srv, levels[0].Key); h != "65" {
		t.Fatalf("held after settleHeld: %s, want 65 (the open reservations')", h)
	}
	// Held below what is open: the commits stop at zero.
	srv.Client().HSet(ctx, spendKey(levels[0].Key), "h", 30)
	if err := s.Commit(r1, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(r2, 5); err != nil {
		t.Fatal(err)
	}
	if h := heldAt(t, srv, levels[0].Key); h != "0" {
		t.Fatalf("held after the commits: %s, want 0, never below", h)
	}
	if _, err := s.Reserve(levels, 1); err != nil {
		t.Fatalf("a reservation after: %v", err)
	}
	if n, err := settleHeld(ctx, s.c, nil); err != nil || n != 0 {
		t.Fatalf("settleHeld of every tree, nothing above: %d, %v", n, err)
	}
}

func TestGlobEscape(t *testing.T) {
	for in, want := range map[string]string{"did:key:z6Mk": "did:key:z6Mk", `a*b?[c]\`: `a\*b\?\[c\]\\`} {
		if got := globEscape(in); got != want {
			t.Errorf("globEscape(%q) = %q, want %q", in, got, want)
		}
	}
}
