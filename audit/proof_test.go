package audit

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every receipt of a log proves itself to the last checkpoint with the
// proxy's did:key alone; a bundle changed anywhere does not verify.
func TestProveAndVerifyBundle(t *testing.T) {
	o := treeOptions
	o.CheckpointEvery = 3
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := writeLog(t, path, 7, o)
	did := testSigner(t, 1).DID()
	for n := int64(1); n <= int64(len(lines)-1); n++ {
		out, err := Prove(path, n, VerifyOptions{Trusted: []string{did}})
		if err != nil {
			t.Fatalf("prove %d: %v", n, err)
		}
		b, err := ParseBundle(out)
		if err != nil {
			t.Fatalf("bundle %d: %v", n, err)
		}
		rep, err := b.Verify(did, nil)
		if err != nil {
			t.Fatalf("bundle %d: %v", n, err)
		}
		if rep.Receipt.Position().Seq != n || rep.Checkpoint.Size != int64(len(lines)-1) || b.Entry+"\n" != string(lines[n-1]) {
			t.Fatalf("bundle %d proves %+v", n, rep)
		}
		if _, err := b.Verify(testSigner(t, 2).DID(), nil); err == nil {
			t.Fatalf("bundle %d verifies under another key", n)
		}
	}
	// The final checkpoint is the last line: nothing proves it yet.
	if _, err := Prove(path, int64(len(lines)), VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "not yet covered") {
		t.Fatalf("prove the final checkpoint: %v", err)
	}

	out, err := Prove(path, 2, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := ParseBundle(out)
	other := writeLog(t, filepath.Join(t.TempDir(), "other.log"), 7, o)
	flip := func(s string) string {
		h, _ := base64.StdEncoding.DecodeString(s)
		h[0] ^= 1
		return base64.StdEncoding.EncodeToString(h)
	}
	cases := map[string]func(b *Bundle){
		"entry edited":         func(b *Bundle) { b.Entry = strings.Replace(b.Entry, `"tool-`, `"tool-9`, 1) },
		"entry of another log": func(b *Bundle) { b.Entry = string(bytes.TrimSuffix(other[1], []byte("\n"))) },
		"another entry":        func(b *Bundle) { b.Entry = string(bytes.TrimSuffix(lines[2], []byte("\n"))) },
		"receipt renumbered":   func(b *Bundle) { b.Receipt = 3 },
		"proof hash changed":   func(b *Bundle) { b.Proof[0] = flip(b.Proof[0]) },
		"proof hash dropped":   func(b *Bundle) { b.Proof = b.Proof[1:] },
		"checkpoint root": func(b *Bundle) {
			l := strings.Split(b.Checkpoint, "\n")
			l[2] = flip(l[2])
			b.Checkpoint = strings.Join(l, "\n")
		},
		"checkpoint size": func(b *Bundle) {
			l := strings.Split(b.Checkpoint, "\n")
			l[1] += "0"
			b.Checkpoint = strings.Join(l, "\n")
		},
		"checkpoint signature":  func(b *Bundle) { b.Checkpoint = b.Checkpoint[:len(b.Checkpoint)-5] + "AAAA\n" },
		"no checkpoint":         func(b *Bundle) { b.Checkpoint = "" },
		"witness not cosigning": nil,
	}
	for name, mod := range cases {
		b := *good
		b.Proof = append([]string(nil), good.Proof...)
		var witnesses []string
		if mod != nil {
			mod(&b)
		} else {
			witnesses = []string{testSigner(t, 3).DID()}
		}
		if _, err := b.Verify(did, witnesses); err == nil {
			t.Errorf("%s: the bundle verifies", name)
		}
	}
	for name, data := range map[string]string{
		"not canonical":  strings.Replace(string(out), `,"entry"`, `, "entry"`, 1),
		"unknown member": strings.Replace(string(out), `{"checkpoint"`, `{"a":1,"checkpoint"`, 1),
		"other kind":     strings.Replace(string(out), BundleKind, "audit_proof/9", 1),
	} {
		if _, err := ParseBundle([]byte(data)); err == nil {
			t.Errorf("%s: the bundle parses", name)
		}
	}
}

// A log continued by another proxy run is consistent with its earlier
// copy; a log rewritten after the copy was taken is not, even when it
// verifies on its own (signed anew by the same key).
func TestConsistency(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	writeLog(t, path, 3, treeOptions)
	old := filepath.Join(dir, "old.log")
	if err := os.WriteFile(old, mustRead(t, path), 0o600); err != nil {
		t.Fatal(err)
	}
	writeLog(t, path, 3, treeOptions)
	rep, err := Consistency(old, path, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Old.Size >= rep.New.Size || len(rep.Proof) == 0 {
		t.Fatalf("report %+v", rep)
	}
	// The old state as a checkpoint note and as a bundle.
	cps := checkpoints(t, readLines(t, old))
	var note string
	for _, c := range cps {
		note = c.Checkpoint
	}
	noteFile := filepath.Join(dir, "old.checkpoint")
	os.WriteFile(noteFile, []byte(note), 0o600)
	if _, err := Consistency(noteFile, path, VerifyOptions{}); err != nil {
		t.Fatalf("from a checkpoint: %v", err)
	}
	bundle, err := Prove(old, 1, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundleFile := filepath.Join(dir, "old.bundle")
	os.WriteFile(bundleFile, bundle, 0o600)
	if _, err := Consistency(bundleFile, path, VerifyOptions{}); err != nil {
		t.Fatalf("from a bundle: %v", err)
	}

	// The same proxy key rewrites the log from scratch, with other calls.
	forked := filepath.Join(dir, "forked.log")
	writeLog(t, forked, 4, treeOptions)
	writeLog(t, forked, 3, treeOptions)
	if _, err := Consistency(old, forked, VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "not an extension") {
		t.Fatalf("a rewritten log: %v", err)
	}
	if _, err := Consistency(path, old, VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "cut back") {
		t.Fatalf("a log cut back: %v", err)
	}
}
