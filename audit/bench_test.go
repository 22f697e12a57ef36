package audit

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/delegateos/delegateos/internal/cputime"

	"github.com/delegateos/delegateos/receipt"
)

// BenchmarkWriter is the audit log writer's work for one call, its
// decision and execution receipts (checkpoints every 1024 entries, a
// write and fsync every 256 calls included), done in the benchmark's
// goroutine so that allocs/op is the writer's own: the default log
// (tree: only checkpoints signed) against sign_each.
func BenchmarkWriter(b *testing.B) {
	for _, mode := range []struct {
		name string
		o    Options
	}{{"tree", treeOptions}, {"sign_each", testOptions}} {
		b.Run(mode.name, func(b *testing.B) {
			l, err := Open(filepath.Join(b.TempDir(), "audit.log"), testSigner(b, 1), mode.o)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			d := decision(1, true)
			x := &receipt.Execution{Decision: d, Request: sha256.Sum256([]byte("req")), Response: sha256.Sum256([]byte("resp")),
				HasResponse: true, CostCommitted: 100, Started: d.At, Completed: d.At.Add(time.Millisecond), Outcome: "result"}
			b.ReportAllocs()
			defer cputime.Report(b)()
			for i := 0; b.Loop(); i++ {
				l.write(event{decision: d})
				l.write(event{execution: x})
				if i%256 == 255 {
					l.flush(true)
				}
			}
			l.flush(true)
		})
	}
}

// BenchmarkVerifyLog is audit verify of a tree log of 100,000 entries
// (50,000 calls), read from memory; ns/entry is the figure to scale.
func BenchmarkVerifyLog(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.log")
	o := treeOptions
	l, err := Open(path, testSigner(b, 1), o)
	if err != nil {
		b.Fatal(err)
	}
	d := decision(1, true)
	x := &receipt.Execution{Decision: d, Request: sha256.Sum256([]byte("req")), Response: sha256.Sum256([]byte("resp")),
		HasResponse: true, CostCommitted: 100, Started: d.At, Completed: d.At.Add(time.Millisecond), Outcome: "result"}
	for i := 0; i < 50000; i++ {
		l.write(event{decision: d})
		l.write(event{execution: x})
		if i%256 == 255 {
			l.flush(true)
		}
	}
	l.flush(true)
	l.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	defer cputime.Report(b)()
	var entries int64
	for b.Loop() {
		rep, err := Verify(bytes.NewReader(data), VerifyOptions{Trusted: []string{testSigner(b, 1).DID()}})
		if err != nil {
			b.Fatal(err)
		}
		entries = rep.Entries
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*entries), "ns/entry")
}

// BenchmarkProve is an inclusion proof in a tree of 2^20 leaves, its
// stored hashes in memory (what audit prove does once it has read the
// log).
func BenchmarkProve(b *testing.B) {
	var s hashStore
	s.hashes = make([]tlog.Hash, 0, 2<<20)
	for i := 0; i < 1<<20; i++ {
		if err := s.add(tlog.RecordHash([]byte{byte(i), byte(i >> 8), byte(i >> 16)})); err != nil {
			b.Fatal(err)
		}
	}
	root, err := tlog.TreeHash(s.n, &s)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n := int64(i*7919) % s.n
		p, err := tlog.ProveRecord(s.n, n, &s)
		if err != nil {
			b.Fatal(err)
		}
		if err := tlog.CheckRecord(p, s.n, root, n, s.hashes[tlog.StoredHashIndex(0, n)]); err != nil {
			b.Fatal(err)
		}
	}
}
