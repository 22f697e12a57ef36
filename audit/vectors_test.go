package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

var update = flag.Bool("update", false, "write testdata/tlog/vectors.log anew (then run testdata/tlog/vectors.py to write vectors.json)")

// vectors is testdata/tlog/vectors.json, written by vectors.py: a second
// implementation (Python, hashlib) of the leaf, tree, proof and checkpoint
// formats of docs/receipts.md, run over vectors.log.
type vectors struct {
	Origin    string   `json:"origin"`
	PublicKey string   `json:"public_key"`
	KeyHash   string   `json:"key_hash"`
	Leaves    []string `json:"leaves"`
	Roots     []string `json:"roots"`
	Checks    []struct {
		Line int64  `json:"line"`
		Size int64  `json:"size"`
		Root string `json:"root"`
		Body string `json:"body"`
	} `json:"checkpoints"`
	Inclusion []struct {
		Index int64    `json:"index"`
		Size  int64    `json:"size"`
		Proof []string `json:"proof"`
	} `json:"inclusion"`
	Consistency []struct {
		Old   int64    `json:"old"`
		New   int64    `json:"new"`
		Proof []string `json:"proof"`
	} `json:"consistency"`
}

// TestVectors checks this implementation against the vectors another one
// computed from the same log.
func TestVectors(t *testing.T) {
	logPath := filepath.Join("testdata", "tlog", "vectors.log")
	if *update {
		os.Remove(logPath)
		o := treeOptions
		o.CheckpointEvery = 4
		clock := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
		o.Now = func() time.Time { return clock }
		writeLog(t, logPath, 7, o)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "tlog", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	s := testSigner(t, 1)
	if v.Origin != Origin(s.DID()) || v.PublicKey != hex.EncodeToString(s.PublicKey()) {
		t.Fatalf("the vectors are of %s %s", v.Origin, v.PublicKey)
	}
	if got := keyHash(v.Origin, algEd25519, s.PublicKey()); hex.EncodeToString([]byte{byte(got >> 24), byte(got >> 16), byte(got >> 8), byte(got)}) != v.KeyHash {
		t.Fatalf("key hash %08x, vectors %s", got, v.KeyHash)
	}
	lines := readLines(t, logPath)
	if _, p := verifyBytes(join(lines), VerifyOptions{Trusted: []string{s.DID()}}); p != nil {
		t.Fatal(p)
	}
	var store hashStore
	for i, l := range lines {
		leaf := LeafHash(bytes.TrimSuffix(l, []byte("\n")))
		if hex.EncodeToString(leaf[:]) != v.Leaves[i] {
			t.Fatalf("leaf %d: %x, vectors %s", i, leaf, v.Leaves[i])
		}
		if err := store.add(leaf); err != nil {
			t.Fatal(err)
		}
		root, err := tlog.TreeHash(int64(i+1), &store)
		if err != nil {
			t.Fatal(err)
		}
		if b64(root) != v.Roots[i] {
			t.Fatalf("root of %d leaves: %s, vectors %s", i+1, b64(root), v.Roots[i])
		}
	}
	cps := checkpoints(t, lines)
	if len(cps) != len(v.Checks) {
		t.Fatalf("%d checkpoints, vectors %d", len(cps), len(v.Checks))
	}
	for _, c := range v.Checks {
		cp, n, err := OpenCheckpoint([]byte(cps[int(c.Line)].Checkpoint), s.DID())
		if err != nil {
			t.Fatal(err)
		}
		if n.Text != c.Body || cp.Size != c.Size || b64(cp.Root) != c.Root {
			t.Fatalf("checkpoint on line %d: %q, vectors %q", c.Line, n.Text, c.Body)
		}
	}
	for _, c := range v.Inclusion {
		p, err := tlog.ProveRecord(c.Size, c.Index, &store)
		if err != nil {
			t.Fatal(err)
		}
		if !sameProof(p, c.Proof) {
			t.Fatalf("inclusion of %d in %d: %v, vectors %v", c.Index, c.Size, p, c.Proof)
		}
	}
	for _, c := range v.Consistency {
		p, err := tlog.ProveTree(c.New, c.Old, &store)
		if err != nil {
			t.Fatal(err)
		}
		if !sameProof(p, c.Proof) {
			t.Fatalf("consistency of %d with %d: %v, vectors %v", c.Old, c.New, p, c.Proof)
		}
	}
	if len(v.Inclusion) == 0 || len(v.Consistency) == 0 {
		t.Fatal("no proofs in the vectors")
	}
}

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

func sameProof(p []tlog.Hash, want []string) bool {
	if len(p) != len(want) {
		return false
	}
	for i := range p {
		if b64(p[i]) != want[i] {
			return false
		}
	}
	return true
}
