package audit

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
)

func witnessKey(t *testing.T, seed byte) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{seed}, 32), "witness")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A witness cosigns each new checkpoint that extends the one it cosigned,
// and refuses one of a log rewritten after it cosigned; verify with the
// witness then catches the rewritten log too.
func TestWitnessCatchesForkAfterCosign(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	did := testSigner(t, 1).DID()
	wk := witnessKey(t, 7)
	w := &Witness{Key: wk, LogKey: did, State: filepath.Join(dir, "witness.state")}
	src := FileSource{Path: path, LogKey: did}

	writeLog(t, path, 3, treeOptions)
	if r, err := w.Step(src); err != nil || r.Old != 0 || r.New == 0 {
		t.Fatalf("first cosignature: %+v %v", r, err)
	}
	writeLog(t, path, 2, treeOptions)
	r, err := w.Step(src)
	if err != nil || r.Old == 0 || r.New <= r.Old {
		t.Fatalf("second cosignature: %+v %v", r, err)
	}
	rep, err := CheckWitnesses(path, CosignaturesFile(path), []string{wk.DID()}, VerifyOptions{})
	if err != nil || rep.Cosigned[wk.DID()] != r.New {
		t.Fatalf("check witnesses: %+v %v", rep, err)
	}
	// The bundle carries the cosignature, and verify-receipt requires it.
	b, err := Prove(path, 1, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, _ := ParseBundle(b)
	if _, err := bundle.Verify(did, []string{wk.DID()}); err != nil {
		t.Fatalf("a cosigned bundle: %v", err)
	}
	if _, err := bundle.Verify(did, []string{witnessKey(t, 8).DID()}); err == nil {
		t.Fatal("a bundle verifies with a witness that did not cosign it")
	}
	if _, err := CheckWitnesses(path, CosignaturesFile(path), []string{witnessKey(t, 8).DID()}, VerifyOptions{}); err == nil {
		t.Fatal("a log passes with a witness that cosigned none of it")
	}

	// The proxy (its key) rewrites the log from scratch, larger, and keeps
	// the cosignatures: it verifies alone, but not with the witness.
	cosigs := mustRead(t, CosignaturesFile(path))
	os.Remove(path)
	os.Remove(CosignaturesFile(path))
	writeLog(t, path, 9, treeOptions)
	os.WriteFile(CosignaturesFile(path), cosigs, 0o600)
	if _, p := verifyBytes(mustRead(t, path), VerifyOptions{Trusted: []string{did}}); p != nil {
		t.Fatal(p)
	}
	var p *Problem
	if _, err := CheckWitnesses(path, CosignaturesFile(path), []string{wk.DID()}, VerifyOptions{}); !errors.As(err, &p) || p.Kind != Forked {
		t.Fatalf("the rewritten log with the witness's cosignatures: %v", err)
	}
	if _, err := w.Step(src); !errors.Is(err, ErrFork) {
		t.Fatalf("the witness cosigns the rewritten log: %v", err)
	}
	// Cut back below what it cosigned: refused too.
	lines := writeLog(t, filepath.Join(dir, "short.log"), 1, treeOptions)
	os.WriteFile(path, join(lines), 0o600)
	if _, err := w.Step(src); !errors.Is(err, ErrFork) {
		t.Fatalf("the witness cosigns a shorter log: %v", err)
	}
}

// serve's handler publishes a live log's latest checkpoint with the
// consistency proof a witness asks for, and keeps its cosignatures.
func TestWitnessOverHTTP(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	o := treeOptions
	o.CheckpointEvery = 2
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wk := witnessKey(t, 7)
	srv := httptest.NewServer(NewWitnessHandler(l, []string{wk.DID()}))
	defer srv.Close()
	did := testSigner(t, 1).DID()
	w := &Witness{Key: wk, LogKey: did, State: filepath.Join(dir, "witness.state")}
	src := URLSource{Base: srv.URL, Client: srv.Client()}
	if _, err := w.Step(src); err == nil {
		t.Fatal("cosigned before any checkpoint")
	}
	written := make(chan *published, 16)
	l.published = func(p *published) { written <- p }
	for i := 0; i < 2; i++ {
		l.Decided(decision(2*i, true))
		l.Decided(decision(2*i+1, false))
		// The checkpoint after the two is in the file.
		for p := range written {
			if cp, _, err := OpenCheckpoint(p.note, did); err == nil && cp.Size == int64(3*i+2) {
				break
			}
		}
		r, err := w.Step(src)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if r.New != int64(3*i+2) {
			t.Fatalf("step %d cosigned %+v", i, r)
		}
	}
	// A key the server does not name as a witness is refused.
	stranger := &Witness{Key: witnessKey(t, 9), LogKey: did, State: filepath.Join(dir, "stranger.state")}
	if _, err := stranger.Step(src); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a stranger's cosignature: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckWitnesses(path, CosignaturesFile(path), []string{wk.DID()}, VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
}
