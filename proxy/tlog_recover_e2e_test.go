//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/receipt"
)

// Receipts after a tree log's last checkpoint are not signed yet: anyone
// who can write the file could have appended them. An execution receipt
// appended after the final checkpoint, charging an earlier call nothing,
// must not lower what store recover rebuilds: such calls are charged what
// they reserved.
func TestE2ERecoverIgnoresUnsignedExecutions(t *testing.T) {
	f := newStoreFleet(t)
	key := mcptest.NewKey(t, "proxy")
	log := filepath.Join(f.e.Dir, "audit.log")
	p, s := f.start(f.a, "proxy_key: "+f.e.KeyFile(key)+"\naudit_log: "+log+"\n", nil)
	if n, typ, detail := drain(t, s, 3); n != 3 {
		t.Fatalf("3 calls: %d forwarded, then %s: %s", n, typ, detail)
	}
	f.settled()
	u := f.usage()[f.key(1)]
	spent := u.Committed + u.Reserved
	if spent != 3*fleetCost {
		t.Fatalf("spent %d, want %d", spent, 3*fleetCost)
	}
	stopProxy(t, p)

	// A forged execution receipt of the first call, charged 0, after the
	// final checkpoint: in place in the chain, without a proof.
	rs, lines := logReceipts(t, log)
	var x *receipt.ExecutionBody
	for _, r := range rs {
		if b, ok := r.Body.(*receipt.ExecutionBody); ok {
			x = b
			break
		}
	}
	if x == nil {
		t.Fatal("no execution receipt")
	}
	x.CostCommitted = 0
	x.Position = receipt.Position{Seq: int64(len(lines) + 1), Prev: rs[len(rs)-1].Digest}
	var enc receipt.Encoder
	forged, err := enc.Append(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.Write(append(forged, '\n'))
	fh.Close()
	if out, _, code := mcptest.CLI(t, "audit", "verify", log, "--key-id", key.DID(), "--open"); code != 0 || !strings.Contains(out, "1 entries after the last checkpoint") {
		t.Fatalf("audit verify --open of the log with the forged entry: %d %s", code, out)
	}

	f.srv.FlushAll()
	out, errs, code := mcptest.CLI(t, "store", "recover", "--store", f.srv.URL(), "--root", f.e.Root.ID(), "--audit", log)
	if code != 0 || !strings.Contains(out, "not signed yet") {
		t.Fatalf("store recover: exit %d, %s%s", code, out, errs)
	}
	if u := f.usage()[f.key(1)]; u.Committed+u.Reserved != spent {
		got := u.Committed + u.Reserved
		t.Fatalf("store recover rebuilt %d spent, want %d: an unsigned execution receipt lowered a call's charge", got, spent)
	}
}
