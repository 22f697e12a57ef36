package chain

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/redistest"
)

func openSharedCopy(t *testing.T, url, copyPath string) *Shared {
	t.Helper()
	s, err := OpenSharedCopy(mustOpen(t, filepath.Join(t.TempDir(), "delegations.jsonl")), url, copyPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// An ending the set loses while no proxy that knew it is open (FLUSHALL)
// is restored from the machine's durable copy by the next proxy opened
// with it, whatever its workspace: it reports the delegation ended, and
// writes the ending back to Redis.
func TestSharedCopyRestoresAnEndingFlushedWhileClosed(t *testing.T) {
	srv := redistest.Start(t)
	f := newFixture(t)
	copyPath := filepath.Join(t.TempDir(), "state", StateCopyName(srv.URL()))
	here := openSharedCopy(t, srv.URL(), copyPath)
	mustInsert(t, here, f.root, f.a, f.b)
	if err := here.Complete(f.b.Key, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	here.Close()
	ctx := context.Background()
	if err := srv.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Without the copy, the ending is gone.
	if st, rec, err := openShared(t, srv.URL()).Status(f.b.Key); err != nil || rec {
		t.Fatalf("without the copy: %q %v %v; want the loss to show (the test's premise)", st, rec, err)
	}
	there := openSharedCopy(t, srv.URL(), copyPath)
	if st, rec, err := there.Status(f.b.Key); err != nil || !rec || st != StatusCompleted {
		t.Fatalf("with the copy: %q %v %v; want completed", st, rec, err)
	}
	if v, err := srv.Client().HGet(ctx, endedHash, f.b.Key).Result(); err != nil || v != string(StatusCompleted) {
		t.Fatalf("the set after the copy was opened: %q %v; want the ending written back", v, err)
	}
}

// Every ending read from the set is kept too, and two proxies sharing the
// copy (two workspaces of one machine) merge their endings: neither
// drops the other's.
func TestSharedCopyKeepsWhatItReadsAndMerges(t *testing.T) {
	srv := redistest.Start(t)
	f := newFixture(t)
	copyPath := filepath.Join(t.TempDir(), StateCopyName(srv.URL()))
	// Written by a proxy of another machine: this machine only reads it.
	other := openShared(t, srv.URL())
	mustInsert(t, other, f.root, f.a, f.b)
	if err := other.Fail(f.b.Key, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	one, two := openSharedCopy(t, srv.URL(), copyPath), openSharedCopy(t, srv.URL(), copyPath)
	mustInsert(t, two, f.root, f.a)
	if _, err := two.Revoke(f.a.Key, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, one, f.a.Key, StatusRevoked)
	got, err := loadEndedCopy(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[f.b.Key] != string(StatusFailed) || got[f.a.Key] != string(StatusRevoked) {
		t.Fatalf("the durable copy = %v; want %s failed and %s revoked", got, f.b.Key, f.a.Key)
	}
}

// A copy that is not one this package writes, or holds an entry that does
// not check, is refused at open, not read as empty.
func TestSharedCopyRefusesABadFile(t *testing.T) {
	srv := redistest.Start(t)
	key := newFixture(t).root.Key
	for name, body := range map[string]string{
		"cut":    `{"ended":{"` + key,
		"empty":  "",
		"other":  `{"seen":{}}`,
		"active": `{"ended":{"` + key + `":"active"}}`,
		"array":  `[]`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ended.json")
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if s, err := OpenSharedCopy(NewMemory(), srv.URL(), p, nil); err == nil {
				s.Close()
				t.Fatalf("a copy holding %q was accepted", body)
			}
		})
	}
}

// A copy that can no longer be written fails closed: Status returns an
// error matching ErrUnavailable, naming the copy, rather than deciding on
// endings only Redis keeps.
func TestSharedCopyUnwritableFailsClosed(t *testing.T) {
	srv := redistest.Start(t)
	f := newFixture(t)
	dir := filepath.Join(t.TempDir(), "state")
	s := openSharedCopy(t, srv.URL(), filepath.Join(dir, "ended.json"))
	mustInsert(t, s, f.root, f.a, f.b)
	// The state directory replaced by a file: nothing can be written in it.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(f.b.Key, "", time.Now()); err == nil || !strings.Contains(err.Error(), "durable copy") {
		t.Fatalf("Complete with an unwritable copy: %v; want the copy named", err)
	}
	_, _, err := s.Status(f.a.Key)
	if !errors.Is(err, redisconn.ErrUnavailable) || !strings.Contains(err.Error(), "durable copy") {
		t.Fatalf("Status with an unwritable copy: %v; want ErrUnavailable naming the copy", err)
	}
}

// The copy is named by the store's host and database: not its password or
// parameters, nor the host's case.
func TestStateCopyName(t *testing.T) {
	a := StateCopyName("redis://127.0.0.1:6379/0")
	for _, same := range []string{"redis://:secret@127.0.0.1:6379/0", "redis://127.0.0.1:6379/0?read_timeout=2s"} {
		if StateCopyName(same) != a {
			t.Errorf("%s is named %s, not %s", same, StateCopyName(same), a)
		}
	}
	if StateCopyName("redis://MyHost:6379/0") != StateCopyName("redis://myhost:6379/0") {
		t.Error("the host's case changes the name")
	}
	for _, other := range []string{"redis://127.0.0.1:6379/1", "redis://127.0.0.1:6380/0"} {
		if StateCopyName(other) == a {
			t.Errorf("%s is named as redis://127.0.0.1:6379/0", other)
		}
	}
}

// FuzzEndedCopy: the durable copy is read back from a file; what is read
// is a set of delegation keys (or IDs) each with a terminal status, or an
// error.
func FuzzEndedCopy(f *testing.F) {
	key := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	f.Add(`{"ended":{"` + key + `":"completed"}}`)
	f.Add(`{"ended":{"del_0123456789ab":"revoked"}}` + "\n")
	f.Add(`{"ended":{}}`)
	f.Add(`{"ended":{"` + key + `":"active"}}`)
	f.Add(`{"ended":null}`)
	f.Add(`{"ended":{"a":"failed","a":"failed"}}`)
	f.Fuzz(func(t *testing.T, data string) {
		got, err := parseEndedCopy("copy", []byte(data))
		if err != nil {
			return
		}
		if got == nil {
			t.Fatalf("%q read as no map", data)
		}
		for k, v := range got {
			if (!ValidKey(k) && !ValidDelegationID(k)) || !Status(v).Terminal() {
				t.Fatalf("%q read as %q: %q", data, k, v)
			}
		}
	})
}
