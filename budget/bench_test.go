package budget

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchLevels is a token three blocks deep.
var benchLevels = []Level{
	{"ISSUER/del_root", 1 << 60},
	{"ISSUER/del_root/del_a", 1 << 59},
	{"ISSUER/del_root/del_a/del_b", 1 << 58},
}

// The proxy's path for one tools/call: Reserve before forwarding, Commit
// after. With a cost, File writes and fsyncs one line per call (Commit of
// the reserved cost writes nothing).
func BenchmarkReserveCommit(b *testing.B) {
	for _, bc := range []struct {
		name string
		cost int64
	}{{"cost=0", 0}, {"cost=100", 100}} {
		for _, k := range storeKinds {
			b.Run(k.name+"/"+bc.name, func(b *testing.B) {
				s := k.open(b)
				b.ReportAllocs()
				for b.Loop() {
					r, err := s.Reserve(benchLevels, bc.cost)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Commit(r, bc.cost); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Commit of an actual cost other than the reserved one: two fsyncs per call.
func BenchmarkReserveCommitCorrected(b *testing.B) {
	s := storeKinds[1].open(b)
	b.ReportAllocs()
	for b.Loop() {
		r, err := s.Reserve(benchLevels, 100)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Commit(r, 90); err != nil {
			b.Fatal(err)
		}
	}
}

// Concurrent calls: File serializes their fsyncs.
func BenchmarkReserveCommitParallel(b *testing.B) {
	for _, cost := range []int64{0, 100} {
		for _, k := range storeKinds {
			b.Run(fmt.Sprintf("%s/cost=%d", k.name, cost), func(b *testing.B) {
				s := k.open(b)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						r, err := s.Reserve(benchLevels, cost)
						if err != nil {
							b.Error(err)
							return
						}
						if err := s.Commit(r, cost); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

func BenchmarkSpent(b *testing.B) {
	for _, k := range storeKinds {
		b.Run(k.name, func(b *testing.B) {
			s := k.open(b)
			spend(b, s, 5, benchLevels[2].Key)
			b.ReportAllocs()
			for b.Loop() {
				if s.Spent(benchLevels[2].Key) != 5 {
					b.Fatal("wrong spend")
				}
			}
		})
	}
}

// OpenFile of a store with 10,000 keys and a full log of appended lines:
// replay plus the rewrite.
func BenchmarkOpenFile(b *testing.B) {
	path := filepath.Join(tempDir(b), "spend.log")
	f, err := OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10_000 {
		spend(b, f, 1, fmt.Sprint("ISSUER/del_", i))
	}
	f.compactAfter = 1 << 30
	for range compactLines {
		r, _ := f.Reserve(benchLevels, 100)
		f.Commit(r, 50)
	}
	crash(b, f)
	b.ReportAllocs()
	for b.Loop() {
		f, err := OpenFile(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// ReadUsage of a store with 10,000 keys and a full log of appended lines,
// as delegateos spend reads it.
func BenchmarkReadUsage(b *testing.B) {
	path := filepath.Join(tempDir(b), "spend.log")
	f, err := OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	f.syncLog = func(*os.File) error { return nil } // only the log's contents matter here
	for i := range 10_000 {
		spend(b, f, 1, fmt.Sprint("ISSUER/del_", i))
	}
	f.compactAfter = 1 << 30
	for range compactLines {
		r, _ := f.Reserve(benchLevels, 100)
		f.Commit(r, 50)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadUsage(path); err != nil {
			b.Fatal(err)
		}
	}
}
