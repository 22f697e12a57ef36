package ratelimit

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redistest"
)

// BenchmarkReserve is one admission at the keys of a call one delegation
// below the root, under a policy-wide limit and a rule's: four keys, with
// the logs in memory, or in a file as well (one append per admission, no
// sync). The limits never refuse.
func BenchmarkReserve(b *testing.B) {
	limits := map[string]Limit{"policy": {N: MaxN, Per: time.Millisecond}, "tools:echo": {N: MaxN, Per: time.Millisecond}}
	keys := []Key{
		{"policy", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6"},
		{"policy", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6/16:del_0a1b2c3d4e5f"},
		{"tools:echo", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6"},
		{"tools:echo", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6/16:del_0a1b2c3d4e5f"},
	}
	run := func(b *testing.B, l *Limiter) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Reserve(keys, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) {
		l, err := New(limits)
		if err != nil {
			b.Fatal(err)
		}
		run(b, l)
	})
	b.Run("file", func(b *testing.B) {
		l, err := OpenFile(filepath.Join(b.TempDir(), "rates"), limits, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
	})
}

// BenchmarkReserveRelease is an admission at the four keys of
// BenchmarkReserve given back at once (a call the budget refuses): in
// memory, or in Redis (two scripts, each one round trip to a local
// redis-server; with appendfsync always each also waits for a sync, and
// with "no" only for the round trip).
func BenchmarkReserveRelease(b *testing.B) {
	limits := map[string]Limit{"policy": {N: 10, Per: time.Minute}, "tools:echo": {N: 10, Per: time.Minute}}
	keys := []Key{
		{"policy", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6"},
		{"policy", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6/16:del_0a1b2c3d4e5f"},
		{"tools:echo", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6"},
		{"tools:echo", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w/16:del_a1b2c3d4e5f6/16:del_0a1b2c3d4e5f"},
	}
	run := func(b *testing.B, s Store) {
		b.ReportAllocs()
		for b.Loop() {
			a, err := s.Reserve(keys, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Release(a); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) {
		l, err := New(limits)
		if err != nil {
			b.Fatal(err)
		}
		run(b, l)
	})
	for _, fsync := range []string{"no", "always"} {
		b.Run("redis-fsync-"+fsync, func(b *testing.B) {
			srv := redistest.StartFsync(b, fsync)
			r, err := OpenRedis(srv.URL(), limits)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			run(b, r)
		})
	}
}
