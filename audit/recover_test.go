package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/receipt"
)

// A log that does not end with a final checkpoint (its proxy was killed,
// or entries were cut from its end) is continued, but only after a signed
// recovery checkpoint at the place it happened: nothing before it is
// changed, and verify names that place unless told to accept it.
func TestOpenRecoversLogWithoutFinalCheckpoint(t *testing.T) {
	o := testOptions
	o.CheckpointEvery = 4
	for _, cut := range []int{1, 2, 3, 5} {
		path := filepath.Join(t.TempDir(), "audit.log")
		lines := writeLog(t, path, 6, o)
		kept := join(lines[:len(lines)-cut])
		if err := os.WriteFile(path, kept, 0o600); err != nil {
			t.Fatal(err)
		}
		at := int64(len(lines) - cut + 1)
		l, err := Open(path, testSigner(t, 1), o)
		if err != nil {
			t.Fatalf("cut %d lines: %v", cut, err)
		}
		if l.Recovered() != at {
			t.Errorf("cut %d lines: Recovered() = %d, want %d", cut, l.Recovered(), at)
		}
		// The recovery checkpoint is in the file before Open returns.
		if got := mustRead(t, path); !bytes.HasPrefix(got, kept) || bytes.Count(got, []byte("\n")) != int(at) ||
			!bytes.Contains(got[len(kept):], []byte(`"recovered":true`)) {
			t.Fatalf("cut %d lines: after Open the log is\n%s", cut, got[len(kept):])
		}
		l.Decided(decision(100, true))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		got := mustRead(t, path)
		if !bytes.HasPrefix(got, kept) {
			t.Fatalf("cut %d lines: what was in the log was changed", cut)
		}
		rep, p := verifyBytes(got, VerifyOptions{})
		if p == nil || p.Kind != Recovered || p.Entry != at || p.Line != at || !strings.Contains(p.Msg, RecoveryMsg(at)) {
			t.Fatalf("cut %d lines: verify: %v, want recovered at entry %d", cut, p, at)
		}
		if len(rep.Recovered) != 1 || rep.Recovered[0] != (Recovery{Entry: at, Line: at}) {
			t.Errorf("cut %d lines: report lists %+v", cut, rep.Recovered)
		}
		rep, p = verifyBytes(got, VerifyOptions{AllowRecovered: true, Trusted: []string{testSigner(t, 1).DID()}})
		if p != nil || !rep.Final || rep.Last != at+2 || !slices.Equal(rep.Recovered, []Recovery{{Entry: at, Line: at}}) {
			t.Fatalf("cut %d lines, recoveries allowed: %v %+v", cut, p, rep)
		}
	}
}

// A log that ends with its final checkpoint is continued without a
// recovery.
func TestOpenCleanLogNoRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 2, testOptions)
	lines := writeLog(t, path, 2, testOptions)
	if bytes.Contains(join(lines), []byte(`"recovered":true`)) {
		t.Fatal("a cleanly closed log was continued with a recovery checkpoint")
	}
	if _, p := verifyBytes(join(lines), VerifyOptions{}); p != nil {
		t.Fatal(p)
	}
}

// A proxy killed again right after it recovered the log: the second start
// recovers again, and verify names both.
func TestTwoRecoveriesInARow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 3, testOptions)
	cut := join(lines[:len(lines)-1])
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	first := int64(len(lines))
	l, err := Open(path, testSigner(t, 1), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	killed := mustRead(t, path) // what a kill -9 right now would leave
	l.Close()
	if err := os.WriteFile(path, killed, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err = Open(path, testSigner(t, 1), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if l.Recovered() != first+1 {
		t.Fatalf("second recovery at %d, want %d", l.Recovered(), first+1)
	}
	l.Decided(decision(9, false))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := mustRead(t, path)
	if !bytes.HasPrefix(got, killed) {
		t.Fatal("the second start changed the log")
	}
	_, p := verifyBytes(got, VerifyOptions{})
	if p == nil || p.Kind != Recovered || p.Entry != first || !strings.Contains(p.Msg, "1 more") {
		t.Fatalf("verify: %v, want recovered at %d and one more", p, first)
	}
	rep, p := verifyBytes(got, VerifyOptions{AllowRecovered: true})
	if p != nil || !slices.Equal(rep.Recovered, []Recovery{{first, first}, {first + 1, first + 1}}) {
		t.Fatalf("recoveries allowed: %v %+v", p, rep.Recovered)
	}
}

// An attacker who cuts entries from the end of a cleanly closed log and
// restarts the proxy cannot make the log whole again: the recovery sits
// where the cut was, and the head the proxy logged at close is missing.
func TestCutAndRestartReportedAtCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 6, testOptions)
	head := receipt.Digest(bytes.TrimSuffix(lines[len(lines)-1], []byte("\n")))
	keep := len(lines) - 4
	if err := os.WriteFile(path, join(lines[:keep]), 0o600); err != nil {
		t.Fatal(err)
	}
	writeLog(t, path, 5, testOptions)
	got := mustRead(t, path)
	_, p := verifyBytes(got, VerifyOptions{})
	if p == nil || p.Kind != Recovered || p.Entry != int64(keep+1) {
		t.Fatalf("verify: %v, want recovered at entry %d", p, keep+1)
	}
	_, p = verifyBytes(got, VerifyOptions{AllowRecovered: true, Head: head})
	if p == nil || p.Kind != Truncated {
		t.Fatalf("verify --head of the closed log: %v, want truncated", p)
	}
}

// The recovered flag is signed: flipped off (to hide a recovery) or on,
// the entry's signature fails, whatever verify accepts.
func TestRecoveredFlagTamper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 2, testOptions)
	if err := os.WriteFile(path, join(lines[:len(lines)-1]), 0o600); err != nil {
		t.Fatal(err)
	}
	lines = writeLog(t, path, 1, testOptions)
	for i, ln := range lines {
		var edited []byte
		switch {
		case bytes.Contains(ln, []byte(`"recovered":true`)):
			edited = bytes.Replace(ln, []byte(`"recovered":true`), []byte(`"recovered":false`), 1)
		case bytes.Contains(ln, []byte(`"recovered":false`)):
			edited = bytes.Replace(bytes.Replace(ln, []byte(`"recovered":false`), []byte(`"recovered":true`), 1), []byte(`"final":true`), []byte(`"final":false`), 1)
		default:
			continue
		}
		tampered := slices.Clone(lines)
		tampered[i] = edited
		_, p := verifyBytes(join(tampered), VerifyOptions{AllowRecovered: true, Open: true})
		if p == nil || p.Kind != Edited || p.Entry != int64(i+1) {
			t.Errorf("line %d with recovered flipped: %v, want edited at entry %d", i+1, p, i+1)
		}
	}
}

// A receipt exports whether the checkpoint after it is a recovery or not,
// and the export of one sealed by a recovery says so.
func TestExportAcrossRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 3, testOptions)
	if err := os.WriteFile(path, join(lines[:len(lines)-1]), 0o600); err != nil {
		t.Fatal(err)
	}
	at := int64(len(lines))
	writeLog(t, path, 2, testOptions)
	for _, n := range []int64{1, at - 1, at, at + 1} {
		out, err := Export(path, n, VerifyOptions{})
		if err != nil {
			t.Fatalf("export %d: %v", n, err)
		}
		rep, p := verifyBytes(out, VerifyOptions{AllowRecovered: true})
		if p != nil || !rep.Export || rep.First != n {
			t.Fatalf("export %d: %v %+v", n, p, rep)
		}
		_, p = verifyBytes(out, VerifyOptions{})
		if n <= at && (p == nil || p.Kind != Recovered || p.Entry != at) {
			t.Errorf("export %d, sealed by the recovery, verified without AllowRecovered: %v", n, p)
		}
		if n > at && p != nil {
			t.Errorf("export %d, after the recovery: %v", n, p)
		}
	}
}

// A log an older proxy closed with an audit_checkpoint/1 is continued
// without a recovery, and verifies.
func TestContinueCheckpointV1Log(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	old, err := testSigner(t, 1).Sign(&receipt.CheckpointBody{SchemaVersion: receipt.KindCheckpointV1, Head: receipt.GenesisPrev,
		Final: true, At: "2026-11-25T21:00:00.000Z", Position: receipt.Position{Seq: 1, Prev: receipt.GenesisPrev}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(old, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := writeLog(t, path, 1, testOptions)
	if bytes.Contains(join(lines), []byte(`"recovered":true`)) || len(lines) != 4 {
		t.Fatalf("continued as\n%s", join(lines))
	}
	if _, p := verifyBytes(join(lines), VerifyOptions{}); p != nil {
		t.Fatal(p)
	}
}
