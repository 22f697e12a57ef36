package audit

import (
	"crypto/sha256"
	"path/filepath"
	"testing"
	"time"

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
			for i := 0; b.Loop(); i++ {
				l.write(event{decision: d})
				l.write(event{execution: x})
				if i%256 == 255 {
					l.flush()
				}
			}
			l.flush()
		})
	}
}
