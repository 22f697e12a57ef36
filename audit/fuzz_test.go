package audit

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/receipt"
)

// FuzzVerify: Verify never panics on any log, and a log it accepts has
// every line a receipt at the position the line gives it.
func FuzzVerify(f *testing.F) {
	lines := writeLog(f, filepath.Join(f.TempDir(), "audit.log"), 3, testOptions)
	f.Add(join(lines))
	f.Add(join(lines[:len(lines)-1]))
	f.Add(append([]byte(`{"receipt":2,"schema_version":"audit_export/1"}`+"\n"), join(lines[1:])...))
	f.Add([]byte("\n\n"))
	// A log continued after a kill: a recovery checkpoint, and the same
	// with its flag flipped.
	path := filepath.Join(f.TempDir(), "recovered.log")
	if err := os.WriteFile(path, join(lines[:len(lines)-1]), 0o600); err != nil {
		f.Fatal(err)
	}
	recovered := join(writeLog(f, path, 1, testOptions))
	f.Add(recovered)
	f.Add(bytes.Replace(recovered, []byte(`"recovered":true`), []byte(`"recovered":false`), 1))
	tree := writeLog(f, filepath.Join(f.TempDir(), "tree.log"), 3, treeOptions)
	f.Add(join(tree))
	f.Add(join(tree[:len(tree)-1]))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Verify(bytes.NewReader(data), VerifyOptions{Open: true, AllowRecovered: true})
		if err != nil {
			return
		}
		n := int64(0)
		if rerr := Read(bytes.NewReader(data), func(line int64, r *receipt.Receipt) error {
			if r.Position().Seq != rep.First+n {
				t.Fatalf("line %d holds entry %d", line, r.Position().Seq)
			}
			n++
			return nil
		}); rerr != nil {
			t.Fatalf("verified but unreadable: %v", rerr)
		}
		if n != rep.Entries {
			t.Fatalf("%d entries read, %d verified", n, rep.Entries)
		}
	})
}

// FuzzOpenCheckpoint: a checkpoint note from outside never panics the
// parser, and one it accepts formats back to the same text.
func FuzzOpenCheckpoint(f *testing.F) {
	s := testSigner(f, 1)
	for _, size := range []int64{0, 1, 1 << 40} {
		note, err := signCheckpoint(Checkpoint{Origin: Origin(s.DID()), Size: size}, s.PublicKey(), s.SignBytes)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(note)
	}
	f.Add([]byte("audit.delegateos/x\n-1\nAAAA\n\n— x AAAAAAA=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := parseCheckpointBody(string(data)); err == nil && c.body() != string(data) {
			t.Fatalf("checkpoint text %q reads as %+v", data, c)
		}
		c, n, err := OpenCheckpoint(data, s.DID())
		if err != nil {
			return
		}
		if n.Text != c.body() {
			t.Fatalf("checkpoint %q reads as %+v", n.Text, c)
		}
	})
}

// FuzzParseBundle: a bundle from outside never panics the parser or its
// check, and one that parses is canonical.
func FuzzParseBundle(f *testing.F) {
	path := filepath.Join(f.TempDir(), "audit.log")
	writeLog(f, path, 3, treeOptions)
	b, err := Prove(path, 2, VerifyOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"checkpoint":"","entry":"","proof":[],"receipt":1,"schema_version":"audit_proof/1"}`))
	did := testSigner(f, 1).DID()
	f.Fuzz(func(t *testing.T, data []byte) {
		bundle, err := ParseBundle(data)
		if err != nil {
			return
		}
		if rep, err := bundle.Verify(did, nil); err == nil && rep.Receipt.Position().Seq != bundle.Receipt {
			t.Fatalf("bundle of receipt %d verifies as entry %d", bundle.Receipt, rep.Receipt.Position().Seq)
		}
	})
}

// FuzzWitnessBody: an add-checkpoint body or a cosigned checkpoint from a
// server never panics the witness's parsers, and a body that parses
// formats back to itself.
func FuzzWitnessBody(f *testing.F) {
	path := filepath.Join(f.TempDir(), "audit.log")
	writeLog(f, path, 5, treeOptions)
	src := FileSource{Path: path, LogKey: testSigner(f, 1).DID()}
	for _, old := range []int64{0, 3, 11} {
		b, err := src.Fetch(old)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("old 1\n\n"))
	s := testSigner(f, 1)
	f.Fuzz(func(t *testing.T, data []byte) {
		if old, proof, note, err := parseWitnessBody(data); err == nil {
			again := fmt.Appendf(nil, "old %d\n", old)
			for _, h := range proof {
				again = append(append(again, base64.StdEncoding.EncodeToString(h[:])...), '\n')
			}
			again = append(append(again, '\n'), note...)
			if !bytes.Equal(again, data) {
				t.Fatalf("body %q reads as old %d, %d hashes, note %q", data, old, len(proof), note)
			}
		}
		_, _, _ = OpenWitnessed(data, s.DID(), []string{testSigner(t, 2).DID()})
		var l cosignatureLine
		_ = canonUnmarshal(data, &l)
	})
}
