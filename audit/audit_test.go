package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/receipt"
)

func testSigner(t testing.TB, seed byte) *receipt.Signer {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{seed}, 32), "proxy")
	if err != nil {
		t.Fatal(err)
	}
	return receipt.NewSigner(k)
}

// testOptions: every receipt signed on its own (receipts: {sign_each:
// true}); no checkpoint by the clock (a slow fsync could let one in
// between entries the tests count).
var testOptions = Options{Receipts: receipt.Options{PolicyHash: strings.Repeat("ab", 32)}, CheckpointInterval: time.Hour, SignEach: true}

// treeOptions are testOptions without a signature on each receipt (the
// default): only the checkpoints are signed.
var treeOptions = Options{Receipts: testOptions.Receipts, CheckpointInterval: time.Hour}

// decision is an allowed or refused tools/call as the proxy hands it over.
func decision(i int, allowed bool) *receipt.Decision {
	d := &receipt.Decision{
		Method: "tools/call", Target: fmt.Sprintf("tool-%d", i), Allowed: allowed, Enforced: true,
		Requested: &dct.Capability{Namespace: "mcp", Action: "call", Resource: fmt.Sprintf("tool-%d", i)},
		Payload:   sha256.Sum256([]byte(fmt.Sprint(i))), At: time.Date(2026, 11, 25, 20, 0, i, 0, time.UTC),
		HasArguments: true, ArgumentsHash: sha256.Sum256([]byte(`{"secret":"hunter2"}`)), Arguments: []byte(`{"secret":"hunter2"}`),
	}
	if !allowed {
		d.DenialType, d.DenialDetail = "capability_not_granted", "not granted"
	} else {
		d.CostReserved = 100
	}
	return d
}

// writeLog writes n calls (every third refused, the others executed) and
// closes the log; it returns the file's lines.
func writeLog(t testing.TB, path string, n int, o Options) [][]byte {
	t.Helper()
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		d := decision(i, i%3 != 2)
		l.Decided(d)
		if d.Allowed {
			l.Executed(&receipt.Execution{Decision: d, Request: sha256.Sum256([]byte("req")), Response: sha256.Sum256([]byte("resp")),
				HasResponse: true, CostCommitted: 100, Started: d.At, Completed: d.At.Add(time.Millisecond), Outcome: "result"})
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return readLines(t, path)
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

func verifyBytes(b []byte, o VerifyOptions) (*Report, *Problem) {
	rep, err := Verify(bytes.NewReader(b), o)
	if err == nil {
		return rep, nil
	}
	var p *Problem
	if !errors.As(err, &p) {
		panic(err)
	}
	return rep, p
}

func join(lines [][]byte) []byte { return bytes.Join(lines, nil) }

func TestLogVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 6, testOptions)
	// 6 decisions, 4 executions, one final checkpoint.
	if len(lines) != 11 {
		t.Fatalf("%d lines, want 11", len(lines))
	}
	rep, p := verifyBytes(join(lines), VerifyOptions{Trusted: []string{testSigner(t, 1).DID()}})
	if p != nil {
		t.Fatal(p)
	}
	if rep.Entries != 11 || rep.Checkpoints != 1 || !rep.Final || rep.Kinds[receipt.KindDecision] != 6 || rep.Kinds[receipt.KindExecution] != 4 {
		t.Fatalf("report %+v", rep)
	}
	// Arguments are hashed, never in clear by default.
	if bytes.Contains(join(lines), []byte("hunter2")) {
		t.Fatal("arguments in clear without include_arguments")
	}
	// Each execution names its decision's digest and audit_id.
	digests := map[string]*receipt.DecisionBody{}
	for _, l := range lines {
		r, err := receipt.ParseEntry(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		switch b := r.Body.(type) {
		case *receipt.DecisionBody:
			digests[r.Digest] = b
		case *receipt.ExecutionBody:
			d := digests[b.DecisionReceiptHash]
			if d == nil || d.AuditID != b.GateAuditID || d.Resource != b.Resource {
				t.Fatalf("execution %s does not name its decision", b.ReceiptID)
			}
		}
	}
	// Another key is not trusted.
	if _, p := verifyBytes(join(lines), VerifyOptions{Trusted: []string{testSigner(t, 2).DID()}}); p == nil || p.Kind != Untrusted || p.Line != 1 {
		t.Fatalf("untrusted key: %v", p)
	}
}

func TestIncludeArguments(t *testing.T) {
	o := testOptions
	o.Receipts.IncludeArguments = true
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 1, o)
	if !bytes.Contains(lines[0], []byte(`"arguments_json":"{\"secret\":\"hunter2\"}"`)) {
		t.Fatalf("arguments not included: %s", lines[0])
	}
}

// Arguments and a result that would make their receipts too large are
// left out of them, and the receipts say so: never silently absent.
func TestIncludeTooLargeMarked(t *testing.T) {
	o := testOptions
	o.Receipts.IncludeArguments, o.Receipts.IncludeResults = true, true
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(`{"s":"` + strings.Repeat(`\"`, receipt.MaxBytes/3) + `"}`)
	d := decision(1, true)
	d.Arguments = big
	l.Decided(d)
	l.Executed(&receipt.Execution{Decision: d, Request: sha256.Sum256([]byte("req")), Response: sha256.Sum256([]byte("resp")),
		HasResponse: true, Result: big, Started: d.At, Completed: d.At, Outcome: "result"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 3 || !bytes.Contains(lines[0], []byte(`"arguments_omitted":"too_large"`)) || bytes.Contains(lines[0], []byte(`"arguments_json"`)) ||
		!bytes.Contains(lines[1], []byte(`"result_omitted":"too_large"`)) || bytes.Contains(lines[1], []byte(`"result_json"`)) {
		t.Fatalf("receipts of arguments and a result too large to hold:\n%s", join(lines))
	}
	if _, p := verifyBytes(join(lines), VerifyOptions{}); p != nil {
		t.Fatal(p)
	}
}

// mutate changes one member of a JSON value.
func mutate(v any) any {
	switch v := v.(type) {
	case string:
		if v == "" {
			return "x"
		}
		return v[:len(v)-1] + string("01"[(v[len(v)-1]+1)%2])
	case float64:
		return v + 1
	case bool:
		return !v
	case []any:
		if len(v) == 0 {
			return []any{"x"}
		}
		return append([]any{}, append(v[1:], mutate(v[0]))...)
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = mutate(x)
		}
		return out
	case nil:
		return "x"
	}
	panic(fmt.Sprintf("%T", v))
}

// TestEveryFieldEdit changes each member of each kind of entry, keeping
// the line canonical JSON, and expects verify to name the entry as edited.
func TestEveryFieldEdit(t *testing.T) {
	t.Run("sign_each", func(t *testing.T) { everyFieldEdit(t, testOptions) })
	t.Run("tree", func(t *testing.T) { everyFieldEdit(t, treeOptions) })
}

func everyFieldEdit(t *testing.T, o Options) {
	o.Receipts.IncludeArguments = true
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 3, o)
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		for key := range m {
			for _, sub := range subKeys(m[key]) {
				edited := cloneMap(m)
				if sub == "" {
					edited[key] = mutate(m[key])
				} else {
					inner := cloneMap(m[key].(map[string]any))
					inner[sub] = mutate(inner[sub])
					edited[key] = inner
				}
				b, err := canon.Marshal(edited)
				if err != nil {
					t.Fatal(err)
				}
				tampered := append(append([][]byte{}, lines[:i]...), append(b, '\n'))
				tampered = append(tampered, lines[i+1:]...)
				_, p := verifyBytes(join(tampered), VerifyOptions{})
				if p == nil || p.Kind != Edited || p.Line != int64(i+1) {
					t.Errorf("line %d member %s.%s edited: got %v", i+1, key, sub, p)
				}
			}
		}
		// Whitespace: the same JSON, not canonical.
		spaced := bytes.Replace(line, []byte(`,"`), []byte(`, "`), 1)
		tampered := append(append([][]byte{}, lines[:i]...), spaced)
		tampered = append(tampered, lines[i+1:]...)
		if _, p := verifyBytes(join(tampered), VerifyOptions{}); p == nil || p.Kind != Edited || p.Line != int64(i+1) {
			t.Errorf("line %d re-spaced: got %v", i+1, p)
		}
	}
}

func subKeys(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{""}
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestNeighbourTampering(t *testing.T) {
	t.Run("sign_each", func(t *testing.T) { neighbourTampering(t, testOptions, Reordered) })
	// Without a signature of its own, an entry of another log in place of
	// one is an edit of that entry.
	t.Run("tree", func(t *testing.T) { neighbourTampering(t, treeOptions, Edited) })
}

func neighbourTampering(t *testing.T, o Options, foreign string) {
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 6, o)
	n := len(lines)
	other := writeLog(t, filepath.Join(t.TempDir(), "other.log"), 6, o)
	signed, err := testSigner(t, 1).Sign(decision(99, true).Body(&testOptions.Receipts))
	if err != nil {
		t.Fatal(err)
	}
	with := func(parts ...[][]byte) []byte {
		var all [][]byte
		for _, p := range parts {
			all = append(all, p...)
		}
		return join(all)
	}
	one := func(b []byte) [][]byte { return [][]byte{b} }
	cases := []struct {
		name string
		log  []byte
		kind string
		line int64
	}{
		{"swap 3 and 4", with(lines[:2], one(lines[3]), one(lines[2]), lines[4:]), Reordered, 3},
		{"move 2 after 5", with(lines[:1], lines[2:5], one(lines[1]), lines[5:]), Removed, 2},
		{"copy of 2 inserted before 5", with(lines[:4], one(lines[1]), lines[4:]), Inserted, 5},
		{"receipt signed outside the log inserted", with(lines[:3], one(append(signed, '\n')), lines[3:]), Inserted, 4},
		{"entry 4 of another log in place of 4", with(lines[:3], one(other[3]), lines[4:]), foreign, 4},
		{"entry 1 removed", with(lines[1:]), Removed, 1},
		{"entry 5 removed", with(lines[:4], lines[5:]), Removed, 5},
		{"entries 3 to 5 removed", with(lines[:2], lines[5:]), Removed, 3},
		{"last checkpoint removed", with(lines[:n-1]), Truncated, int64(n - 1)},
		{"last three entries removed", with(lines[:n-3]), Truncated, int64(n - 3)},
		{"cut mid-entry", with(lines[:n-1], one(lines[n-1][:40])), Truncated, int64(n)},
		{"line too long", with(lines[:2], one(append(bytes.Repeat([]byte("x"), MaxLineBytes+10), '\n')), lines[2:]), Malformed, 3},
		{"blank line", with(lines[:2], one([]byte("\n")), lines[2:]), Edited, 3},
		{"every entry removed", nil, Truncated, 0},
	}
	for _, c := range cases {
		_, p := verifyBytes(c.log, VerifyOptions{})
		if p == nil || p.Kind != c.kind || p.Line != c.line {
			t.Errorf("%s: got %v, want %s at line %d", c.name, p, c.kind, c.line)
		}
	}
	// An open log may end after its last checkpoint.
	if _, p := verifyBytes(with(lines[:n-1]), VerifyOptions{Open: true}); p != nil {
		t.Errorf("open log: %v", p)
	}
}

func TestReopenContinuesChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 2, testOptions)
	lines := writeLog(t, path, 2, testOptions)
	if _, p := verifyBytes(join(lines), VerifyOptions{}); p != nil {
		t.Fatal(p)
	}
	if len(lines) != 2*(2+2+1) {
		t.Fatalf("%d lines", len(lines))
	}
}

func TestSecondWriterRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, testSigner(t, 1), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Open(path, testSigner(t, 1), testOptions); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v", err)
	}
}

func TestOpenRefusesCutLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 2, testOptions)
	if err := os.WriteFile(path, join(lines)[:len(join(lines))-5], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, testSigner(t, 1), testOptions); err == nil || !strings.Contains(err.Error(), "middle of an entry") {
		t.Fatalf("cut log: %v", err)
	}
	if err := os.WriteFile(path, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, testSigner(t, 1), testOptions); err == nil {
		t.Fatal("a file that is not a log was opened")
	}
	link := filepath.Join(t.TempDir(), "link.log")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link, testSigner(t, 1), testOptions); err == nil {
		t.Fatal("a symbolic link was opened")
	}
}

func TestPeriodicCheckpoints(t *testing.T) {
	o := testOptions
	o.CheckpointEvery = 4
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 6, o)
	rep, p := verifyBytes(join(lines), VerifyOptions{})
	if p != nil {
		t.Fatal(p)
	}
	if rep.Checkpoints < 3 {
		t.Fatalf("%d checkpoints, want a periodic one every 4 entries", rep.Checkpoints)
	}
	// Truncated exactly after a periodic checkpoint: not the final one.
	for i, l := range lines[:len(lines)-1] {
		r, _ := receipt.ParseEntry(bytes.TrimSuffix(l, []byte("\n")))
		if r.Kind == receipt.KindCheckpoint {
			if _, p := verifyBytes(join(lines[:i+1]), VerifyOptions{}); p == nil || p.Kind != Truncated {
				t.Fatalf("cut after the periodic checkpoint on line %d: %v", i+1, p)
			}
			break
		}
	}
}

func TestExport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	o := testOptions
	o.CheckpointEvery = 4
	lines := writeLog(t, path, 6, o)
	for n := int64(1); n <= int64(len(lines)); n++ {
		b, err := Export(path, n, VerifyOptions{})
		if err != nil {
			t.Fatalf("export %d: %v", n, err)
		}
		rep, p := verifyBytes(b, VerifyOptions{})
		if p != nil || !rep.Export || rep.First != n {
			t.Fatalf("export %d: %v %+v", n, p, rep)
		}
		// The receipt is the export's second line, as in the log.
		if got := bytes.SplitAfter(b, []byte("\n"))[1]; !bytes.Equal(got, lines[n-1]) {
			t.Fatalf("export %d holds %s", n, got)
		}
		// Without its checkpoint it proves nothing.
		cut := b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1]
		if bytes.Count(cut, []byte("\n")) > 1 {
			if _, p := verifyBytes(cut, VerifyOptions{}); p == nil || p.Kind != Truncated {
				t.Fatalf("export %d without its checkpoint: %v", n, p)
			}
		}
	}
	if _, err := Export(path, int64(len(lines)+1), VerifyOptions{}); err == nil {
		t.Fatal("exported an entry past the end")
	}
}

// The approval path: a human approval receipt appended (its digest sent
// back), then the decision it allowed, naming it, and the execution.
func TestApprovalPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, testSigner(t, 1), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	auditID := receipt.NewUUIDURN()
	ap := &receipt.HumanApprovalBody{ApprovalID: "appr-1", GateAuditID: auditID, Action: "mcp.tools.call", Resource: "tool-0",
		RiskClass: "write", GateReason: "approval: required", Decision: receipt.ApprovalApproved, Reason: "accepted",
		RequestedAt: "2026-11-25T20:00:00.000Z", DecidedAt: "2026-11-25T20:00:03.000Z", Cost: 100}
	receipt.FillHumanApproval(ap)
	res := make(chan AppendResult, 1)
	l.Append(ap, res)
	r := <-res
	if r.Err != nil || r.Seq != 1 {
		t.Fatalf("append: %+v", r)
	}
	d := decision(0, true)
	d.AuditID, d.ApprovalID, d.ApprovalReceiptHash = auditID, "appr-1", r.Digest
	l.Decided(d)
	l.Executed(&receipt.Execution{Decision: d, Started: d.At, Completed: d.At, Outcome: "result"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if _, p := verifyBytes(join(lines), VerifyOptions{}); p != nil {
		t.Fatal(p)
	}
	if receipt.Digest(bytes.TrimSuffix(lines[0], []byte("\n"))) != r.Digest {
		t.Fatal("the digest sent back is not the entry's")
	}
	for _, want := range []string{`"approval_receipt_hash":"` + r.Digest, `"audit_id":"` + auditID, `"approval_id":"appr-1"`} {
		if !bytes.Contains(lines[1], []byte(want)) {
			t.Errorf("decision lacks %s: %s", want, lines[1])
		}
	}
	if !bytes.Contains(lines[2], []byte(`"approval_receipt_hash":"`+r.Digest)) {
		t.Errorf("execution does not name the approval: %s", lines[2])
	}
}

// A write that fails is reported once, and Failed says so from then on.
func TestWriteFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	errs := make(chan error, 4)
	o := testOptions
	o.OnError = func(err error) { errs <- err }
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	l.f.Close() // every write now fails
	l.Decided(decision(0, true))
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "write the audit log") {
		t.Fatalf("OnError: %v", err)
	}
	if !l.Failed() || l.Err() == nil {
		t.Fatal("Failed is not set")
	}
	l.Decided(decision(1, true))
	if err := l.Close(); err == nil {
		t.Fatal("Close reported no failure")
	}
	if len(errs) != 0 {
		t.Fatalf("reported more than once: %v", <-errs)
	}
}

// A log cut back to the end of an earlier session looks whole, unless
// verify is given the head the later session closed with.
func TestHeadCatchesSessionCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	first := writeLog(t, path, 2, testOptions)
	l, err := Open(path, testSigner(t, 1), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	l.Decided(decision(7, false))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seq, head := l.Head()
	all := readLines(t, path)
	if seq != int64(len(all)) || head != receipt.Digest(bytes.TrimSuffix(all[len(all)-1], []byte("\n"))) {
		t.Fatalf("Head() = %d %s", seq, head)
	}
	if _, p := verifyBytes(join(all), VerifyOptions{Head: head}); p != nil {
		t.Fatal(p)
	}
	if _, p := verifyBytes(join(first), VerifyOptions{}); p != nil {
		t.Fatalf("the first session alone: %v", p)
	}
	if _, p := verifyBytes(join(first), VerifyOptions{Head: head}); p == nil || p.Kind != Truncated {
		t.Fatalf("cut back to the first session, with --head: %v", p)
	}
}
