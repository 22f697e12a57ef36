package main

import (
	"bytes"
	"crypto/sha256"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/receipt"
)

// The drain counts a log's decision and execution receipts, not its
// checkpoints (periodic ones, every 4 entries here, and the final one),
// however the reads cut the log (a read holds at least a line).
func TestAuditDrainCountsReceipts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	k, err := identity.FromSeed(bytes.Repeat([]byte{7}, 32), "bench")
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(path, receipt.NewSigner(k), audit.Options{CheckpointEvery: 4, Receipts: receipt.Options{PolicyHash: "00"}})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 50
	at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	for i := range calls {
		d := &receipt.Decision{Method: "tools/call", Target: "echo", Allowed: true, Enforced: true, At: at, Payload: sha256.Sum256([]byte{byte(i)})}
		l.Decided(d)
		l.Executed(&receipt.Execution{Decision: d, Started: at, Completed: at, Outcome: "result"})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1 << 20, 1500} {
		d := &auditDrain{path: path, buf: make([]byte, size)}
		if err := d.wait(calls); err != nil {
			t.Fatal(err)
		}
		if d.receipts != 2*calls {
			t.Errorf("reading %d bytes at a time: %d receipts, want %d", size, d.receipts, 2*calls)
		}
	}
}
