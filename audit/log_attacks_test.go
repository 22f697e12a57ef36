package audit

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/receipt"
)

// Without --key-id, a log is trusted to the key of its first entry only:
// entries appended by anyone else's key (a whole session written with
// another key after the proxy's final checkpoint) must not verify.
func TestVerifyWithoutKeyIDOneSigner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 3, testOptions)
	l, err := Open(path, testSigner(t, 2), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	d := decision(7, true)
	l.Decided(d)
	l.Executed(&receipt.Execution{Decision: d, Request: sha256.Sum256([]byte("forged")), CostCommitted: 0,
		Started: d.At, Completed: d.At.Add(time.Millisecond), Outcome: "error"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, p := verifyBytes(mustRead(t, path), VerifyOptions{})
	if p == nil || p.Kind != Untrusted || p.Entry != 7 {
		t.Fatalf("a log signed by two keys, verified without a key: %v; want untrusted at entry 7", p)
	}
	both := []string{testSigner(t, 1).DID(), testSigner(t, 2).DID()}
	if _, p := verifyBytes(mustRead(t, path), VerifyOptions{Trusted: both}); p != nil {
		t.Fatalf("both keys given: %v", p)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A receipt that cannot be signed (too large) is not skipped over: the
// entries queued after it are not written either, so the log ends without
// its final checkpoint instead of verifying with a receipt missing.
func TestUnsignableReceiptStopsLog(t *testing.T) {
	t.Run("sign_each", func(t *testing.T) { unsignableReceiptStopsLog(t, testOptions) })
	t.Run("tree", func(t *testing.T) { unsignableReceiptStopsLog(t, treeOptions) })
}

func unsignableReceiptStopsLog(t *testing.T, o Options) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	l.Decided(decision(1, true))
	at := "2026-11-25T20:00:00.000Z"
	res := make(chan AppendResult, 1)
	l.Append(&receipt.HumanApprovalBody{ApprovalID: "a", GateAuditID: receipt.NewUUIDURN(), Action: "mcp.tools.call", Resource: "echo",
		RiskClass: "unknown", GateReason: "approval_required", Decision: receipt.ApprovalApproved, Reason: strings.Repeat("x", receipt.MaxBytes),
		RequestedAt: at, DecidedAt: at}, res)
	if r := <-res; r.Err == nil {
		t.Fatal("a receipt larger than MaxBytes was appended")
	}
	l.Decided(decision(2, true))
	l.Close()
	rep, p := verifyBytes(mustRead(t, path), VerifyOptions{})
	if p == nil || p.Kind != Truncated || rep.Last != 1 {
		t.Fatalf("after a receipt that could not be written: %v (%+v); want the log to end at entry 1, truncated", p, rep)
	}
	if !l.Failed() {
		t.Fatal("the log does not report its failure")
	}
}

// An export's first line is not signed: put before a log, it must not
// make the log verify as an export when the log is not one (cut back to
// a periodic checkpoint, its final checkpoint gone). An export holds its
// receipt and the entries up to the first checkpoint after it, no more.
func TestExportHeaderDoesNotLaunderLog(t *testing.T) {
	o := testOptions
	o.CheckpointEvery = 4
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 6, o)
	header := []byte(`{"receipt":1,"schema_version":"audit_export/1"}` + "\n")
	var ckpts []int
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"schema_version":"`+receipt.KindCheckpoint+`"`)) {
			ckpts = append(ckpts, i)
		}
	}
	if len(ckpts) < 3 {
		t.Fatalf("%d checkpoints", len(ckpts))
	}
	for _, end := range ckpts[1:] {
		forged := append(append([]byte(nil), header...), join(lines[:end+1])...)
		if rep, p := verifyBytes(forged, VerifyOptions{}); p == nil {
			t.Errorf("the log up to entry %d, headed as an export of receipt 1, verifies: %+v", end+1, rep)
		}
	}
	genuine := append(append([]byte(nil), header...), join(lines[:ckpts[0]+1])...)
	if _, p := verifyBytes(genuine, VerifyOptions{}); p != nil {
		t.Errorf("an export of receipt 1: %v", p)
	}
}

// A second proxy reaching the same log by another name (a hard link)
// must be refused too: two writers would each continue the chain from
// the same entry, and the log would fork.
func TestSecondWriterByHardLinkRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := Open(path, testSigner(t, 1), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := filepath.Join(dir, "other.log")
	if err := os.Link(path, other); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(other, testSigner(t, 1), testOptions)
	if err == nil {
		l2.Close()
		t.Fatal("a second writer opened the log through a hard link")
	}
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v", err)
	}
}

// Each way of writing an entry other than its canonical bytes is named at
// its line, even where the JSON means the same.
func TestVerifyStrictEntryBytes(t *testing.T) {
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 2, testOptions)
	entry := bytes.TrimSuffix(lines[0], []byte("\n"))
	cases := map[string][]byte{
		"CRLF":             append(append([]byte(nil), entry...), '\r'),
		"duplicate member": bytes.Replace(entry, []byte(`{"action":`), []byte(`{"action":"x","action":`), 1),
		"re-cased member":  bytes.Replace(entry, []byte(`"audit_seq":`), []byte(`"Audit_seq":`), 1),
		"invalid UTF-8":    bytes.Replace(entry, []byte(`"environment":"unknown"`), []byte("\"environment\":\"unkn\xffwn\""), 1),
		"escaped letter":   bytes.Replace(entry, []byte(`"environment":"unknown"`), []byte(`"environment":"\u0075nknown"`), 1),
		"space":            bytes.Replace(entry, []byte(`"environment":"unknown"`), []byte(`"environment": "unknown"`), 1),
		"deep arguments":   bytes.Replace(entry, []byte(`"arguments_hash":`), []byte(`"arguments":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`,"arguments_hash":`), 1),
		"huge line":        append(append([]byte(nil), entry...), bytes.Repeat([]byte(" "), MaxLineBytes)...),
	}
	for name, bad := range cases {
		if bytes.Equal(bad, entry) {
			t.Fatalf("%s: the entry was not changed", name)
		}
		log := join(append([][]byte{append(bad, '\n')}, lines[1:]...))
		if _, p := verifyBytes(log, VerifyOptions{}); p == nil || p.Line != 1 {
			t.Errorf("%s: %v; want a problem at line 1", name, p)
		}
	}
}
