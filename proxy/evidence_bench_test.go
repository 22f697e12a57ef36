package proxy

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/cputime"
	"github.com/delegateos/delegateos/receipt"
)

// discardEvidence takes the records and drops them: what receipts cost
// the relay's own path.
type discardEvidence struct{ n int }

func (d *discardEvidence) Decided(*receipt.Decision)   { d.n++ }
func (d *discardEvidence) Executed(*receipt.Execution) { d.n++ }
func (d *discardEvidence) Failed() bool                { return false }
func (d *discardEvidence) Approval(*receipt.HumanApprovalBody) (string, error) {
	d.n++
	return "", nil
}

// BenchmarkCallEvidence is BenchmarkCall (log=info) with receipts:
// evidence=off is the proxy without an audit log; evidence=handoff hands
// each decision and execution over and drops them (the relay's share);
// evidence=audit writes them, signed, to an audit log with its writer
// goroutine, the log closed (final checkpoint, fsync) inside the timing,
// so that cpu-ns/op holds the whole cost of a call's two receipts.
func BenchmarkCallEvidence(b *testing.B) {
	b.Run("evidence=off", func(b *testing.B) { benchCall(b, benchSession(b)) })
	b.Run("evidence=handoff", func(b *testing.B) {
		s := benchSession(b)
		d := &discardEvidence{}
		s.cfg.Evidence = d
		benchCall(b, s)
		if d.n != 2*b.N {
			b.Fatalf("%d records for %d calls", d.n, b.N)
		}
	})
	// evidence=audit is the default log, whose checkpoints alone are
	// signed; evidence=audit-sign-each signs every receipt as well
	// (receipts: {sign_each: true}).
	for _, signEach := range []bool{false, true} {
		name := "evidence=audit"
		if signEach {
			name += "-sign-each"
		}
		b.Run(name, func(b *testing.B) {
			s := benchSession(b)
			k, err := identity.FromSeed(bytes.Repeat([]byte{9}, 32), "proxy")
			if err != nil {
				b.Fatal(err)
			}
			l, err := audit.Open(filepath.Join(b.TempDir(), "audit.log"), receipt.NewSigner(k),
				audit.Options{Receipts: receipt.Options{PolicyHash: strings.Repeat("0", 64)}, SignEach: signEach})
			if err != nil {
				b.Fatal(err)
			}
			s.cfg.Evidence = l
			b.ReportAllocs()
			defer cputime.Report(b)()
			benchCall(b, s)
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
