package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitFor is a hang detector for an event the writer reports, not a
// measure of time.
const waitFor = 60 * time.Second

// countLines reads the log file as another process would: what has been
// written, synced or not.
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// Each batch is written at once, in order, before it is synced: a reader
// sees it while its sync waits (SyncInterval an hour here). The first
// batch syncs at once (no sync before it), later ones wait, and Close
// syncs what is unsynced with its final checkpoint.
func TestSyncWrittenBeforeSynced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	o := treeOptions
	o.SyncInterval = time.Hour
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	syncs := make(chan struct{}, 16)
	l.synced = func() { syncs <- struct{}{} }
	l.Decided(decision(0, false))
	select {
	case <-syncs:
	case <-time.After(waitFor):
		t.Fatal("the first batch was not synced")
	}
	wrote := make(chan struct{}, 16)
	l.wroteBatch = func() { wrote <- struct{}{} }
	for i := 1; i <= 3; i++ {
		l.Decided(decision(i, false))
		<-wrote
		if n := countLines(t, path); n != i+1 {
			t.Fatalf("%d lines in the file after %d entries", n, i+1)
		}
	}
	if len(syncs) != 0 {
		t.Fatal("a batch was synced before SyncInterval had passed")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(syncs) != 1 {
		t.Fatalf("%d syncs at Close, want 1", len(syncs))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 5 || !bytes.HasPrefix(lines[4], []byte(`{"at":"`)) {
		t.Fatalf("%d lines, the last %.60s; want 4 entries and the final checkpoint", len(lines), lines[len(lines)-1])
	}
}

// When calls stop, what was written unsynced is synced within
// SyncInterval by the writer itself (no later batch, no Close).
func TestSyncAfterCallsStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	o := treeOptions
	o.SyncInterval = 20 * time.Millisecond
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	syncs := make(chan struct{}, 16)
	l.synced = func() { syncs <- struct{}{} }
	l.Decided(decision(0, false))
	<-syncs // the first batch
	l.Decided(decision(1, false))
	select {
	case <-syncs:
		if n := countLines(t, path); n != 2 {
			t.Fatalf("%d lines synced, want 2", n)
		}
	case <-time.After(waitFor):
		t.Fatal("an entry written after the last call was never synced")
	}
}

// A checkpoint is synced when it is written, however recent the last
// sync, and published (to witnesses) only then.
func TestSyncAtCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	o := treeOptions
	o.SyncInterval = time.Hour
	o.CheckpointEvery = 4
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	syncs := make(chan struct{}, 16)
	l.synced = func() { syncs <- struct{}{} }
	pubs := make(chan *published, 16)
	l.published = func(p *published) {
		if len(syncs) != 0 {
			t.Error("a checkpoint was published before its sync was reported")
		}
		pubs <- p
	}
	l.Decided(decision(0, false))
	<-syncs
	for i := 1; i < 4; i++ {
		l.Decided(decision(i, false))
	}
	select {
	case p := <-pubs:
		<-syncs
		if !strings.Contains(string(p.note), "\n4\n") {
			t.Fatalf("published %q, want the checkpoint of 4 entries", p.note)
		}
	case <-time.After(waitFor):
		t.Fatal("the checkpoint was not synced and published")
	}
}

// A sync that fails, found up to SyncInterval after the write, stops the
// log as a failed write does: Failed is set (the relay then refuses every
// call: evidence_unavailable), OnError is told, nothing more is written.
func TestSyncFailureFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	o := treeOptions
	o.SyncInterval = 20 * time.Millisecond
	failed := make(chan error, 4)
	o.OnError = func(err error) { failed <- err }
	l, err := Open(path, testSigner(t, 1), o)
	if err != nil {
		t.Fatal(err)
	}
	syncs := 0
	l.syncFile = func() error {
		syncs++
		if syncs > 1 {
			return errors.New("injected: EIO")
		}
		return l.f.Sync()
	}
	l.Decided(decision(0, false))
	<-l.Written()
	l.Decided(decision(1, false))
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "sync the audit log") || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("OnError told %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("a failed sync was never reported")
	}
	if !l.Failed() || l.Err() == nil {
		t.Fatal("the log does not count as failed after its sync failed")
	}
	before := countLines(t, path)
	l.Decided(decision(2, false))
	<-l.Written()
	l.Close()
	if n := countLines(t, path); n != before {
		t.Fatalf("%d lines after the failure, %d before: the log went on", n, before)
	}
}
