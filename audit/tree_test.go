package audit

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/receipt"
)

// checkpoints are the tree checkpoints of a log's lines, by line (from 1).
func checkpoints(t *testing.T, lines [][]byte) map[int]*receipt.CheckpointBody {
	t.Helper()
	out := map[int]*receipt.CheckpointBody{}
	for i, l := range lines {
		r, err := receipt.ParseEntry(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := r.Body.(*receipt.CheckpointBody); ok && c.Checkpoint != "" {
			out[i+1] = c
		}
	}
	return out
}

// treeOf is the root of the tree of lines, computed by tlog's own
// stored-hash functions (not the writer's frontier).
func treeOf(t *testing.T, lines [][]byte) tlog.Hash {
	t.Helper()
	var s hashStore
	for _, l := range lines {
		if err := s.add(LeafHash(bytes.TrimSuffix(l, []byte("\n")))); err != nil {
			t.Fatal(err)
		}
	}
	h, err := tlog.TreeHash(s.n, &s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Without sign_each, only checkpoints carry a proof, and each signs the
// Merkle tree of every line before it.
func TestTreeCheckpointsSignTheLog(t *testing.T) {
	o := treeOptions
	o.CheckpointEvery = 3
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 7, o)
	did := testSigner(t, 1).DID()
	cps := checkpoints(t, lines)
	if len(cps) < 3 {
		t.Fatalf("%d checkpoints", len(cps))
	}
	for line, c := range cps {
		cp, _, err := OpenCheckpoint([]byte(c.Checkpoint), did)
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		if cp.Size != int64(line-1) || cp.Root != treeOf(t, lines[:line-1]) {
			t.Fatalf("line %d: checkpoint of %d entries, root %v: not the tree of the lines before it", line, cp.Size, cp.Root)
		}
		if _, _, err := OpenCheckpoint([]byte(c.Checkpoint), testSigner(t, 2).DID()); err == nil {
			t.Fatal("a checkpoint verifies under another key")
		}
	}
	unsigned := 0
	for _, l := range lines {
		if !bytes.Contains(l, []byte(`"proof"`)) {
			unsigned++
		}
	}
	if unsigned != len(lines)-len(cps) {
		t.Fatalf("%d of %d lines unsigned, want all but the %d checkpoints", unsigned, len(lines), len(cps))
	}
	rep, p := verifyBytes(join(lines), VerifyOptions{Trusted: []string{did}})
	if p != nil {
		t.Fatal(p)
	}
	if rep.Unsigned != int64(unsigned) || rep.Trees != len(cps) {
		t.Fatalf("report %+v", rep)
	}
	// An open log's entries after its last checkpoint are not signed yet.
	if _, p := verifyBytes(join(lines[:len(lines)-1]), VerifyOptions{Open: true}); p != nil {
		t.Fatal(p)
	}
}

// A checkpoint signed by the right key over another tree than the lines
// before it (an entry changed and the chain rewritten up to it) is caught
// by its root.
func TestTreeRootMismatch(t *testing.T) {
	lines := writeLog(t, filepath.Join(t.TempDir(), "audit.log"), 3, treeOptions)
	s := testSigner(t, 1)
	last := len(lines) - 1
	r, err := receipt.ParseEntry(bytes.TrimSuffix(lines[last], []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	c := r.Body.(*receipt.CheckpointBody)
	wrong := treeOf(t, lines[:last-1])
	note, err := signCheckpoint(Checkpoint{Origin: Origin(s.DID()), Size: c.Length, Root: wrong}, s.PublicKey(), s.SignBytes)
	if err != nil {
		t.Fatal(err)
	}
	c.Checkpoint = string(note)
	forged, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	tampered := append(append([][]byte{}, lines[:last]...), append(forged, '\n'))
	if _, p := verifyBytes(join(tampered), VerifyOptions{}); p == nil || p.Kind != Edited || p.Line != int64(last+1) || !strings.Contains(p.Msg, "root") {
		t.Fatalf("checkpoint of another root: %v", p)
	}
	// Nor may a checkpoint's note be of another size than its length.
	c.Checkpoint = ""
	note, _ = signCheckpoint(Checkpoint{Origin: Origin(s.DID()), Size: c.Length - 1, Root: treeOf(t, lines[:last-1])}, s.PublicKey(), s.SignBytes)
	c.Checkpoint = string(note)
	c.At = timestamp.Format(time.Now())
	forged, _ = s.Sign(c)
	tampered = append(append([][]byte{}, lines[:last]...), append(forged, '\n'))
	if _, p := verifyBytes(join(tampered), VerifyOptions{}); p == nil || p.Kind != Edited || p.Line != int64(last+1) {
		t.Fatalf("checkpoint of another size: %v", p)
	}
}

// A proxy killed after it wrote entries without a checkpoint: the next
// Open hashes every line back into the tree, and its recovery checkpoint
// signs them all, a consistent extension of the last checkpoint.
func TestTreeRecoveryExtendsTree(t *testing.T) {
	o := treeOptions
	o.CheckpointEvery = 4
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 6, o)
	kept := lines[:len(lines)-1]
	if err := os.WriteFile(path, join(kept), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	l.Decided(decision(100, true))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, path)
	c := checkpoints(t, got)[len(kept)+1]
	if c == nil || !c.IsRecovered() {
		t.Fatalf("no recovery checkpoint on line %d", len(kept)+1)
	}
	cp, _, err := OpenCheckpoint([]byte(c.Checkpoint), testSigner(t, 1).DID())
	if err != nil || cp.Root != treeOf(t, kept) {
		t.Fatalf("the recovery checkpoint does not sign the lines before it: %v", err)
	}
	if _, p := verifyBytes(join(got), VerifyOptions{AllowRecovered: true}); p != nil {
		t.Fatal(p)
	}
}

// A log whose last entry's number is not its line count is not continued:
// its tree's leaf n would not be entry n.
func TestTreeOpenRefusesRenumberedLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 3, treeOptions)
	if err := os.WriteFile(path, join(append(append([][]byte{}, lines[:1]...), lines[2:]...)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, testSigner(t, 1), treeOptions); err == nil || !strings.Contains(err.Error(), "on line") {
		t.Fatalf("Open of a log with an entry removed: %v", err)
	}
}

// A proxy that stops before any call signs the empty tree (RFC 6962: the
// SHA-256 of no bytes), and every later log extends it.
func TestTreeEmptyLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	lines := writeLog(t, path, 0, treeOptions)
	c := checkpoints(t, lines)[1]
	cp, _, err := OpenCheckpoint([]byte(c.Checkpoint), testSigner(t, 1).DID())
	if err != nil || cp.Size != 0 || cp.Root != tlog.Hash(sha256.Sum256(nil)) {
		t.Fatalf("the empty log's checkpoint: %+v %v", cp, err)
	}
	old := filepath.Join(dir, "old.log")
	if err := os.WriteFile(old, join(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	writeLog(t, path, 2, treeOptions)
	if _, err := Consistency(old, path, VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
}
