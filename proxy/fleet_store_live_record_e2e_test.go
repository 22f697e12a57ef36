//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// The state directory's files the live records (live.go) and the machine's
// instances (instance.go) rely on, damaged or left half-done: each is
// refused at start naming the file, or taken up by the next start.

// A live record whose bytes are not one delegateos writes (a disk error,
// a tool) refuses the start, naming it: its counts cannot be read, and
// dropping them could hide a store gone back to an older snapshot.
func TestE2EFaultGarbledLiveRecordRefused(t *testing.T) {
	f := newStoreFleet(t)
	p, s := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s, 1); n != 1 {
		t.Fatalf("the first call was refused: %s: %s", typ, detail)
	}
	stopProxy(t, p)
	rec := strings.TrimSuffix(f.seenFiles()[0], ".seen.json") + ".live.garbled.1"
	if err := os.WriteFile(rec, []byte(strings.Repeat("not a live record ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := f.startRefused("with a garbled live record"); !strings.Contains(msg, rec) || strings.Contains(msg, "panic") {
		t.Errorf("a garbled live record: the refusal does not name it: %s", msg)
	}
}

// A machine-instances list that is not one delegateos writes refuses the
// start, naming it and what to do.
func TestE2EFaultGarbledMachineInstancesRefused(t *testing.T) {
	f := newStoreFleet(t)
	p, s := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s, 1); n != 1 {
		t.Fatalf("the first call was refused: %s: %s", typ, detail)
	}
	stopProxy(t, p)
	list := filepath.Join(f.e.Dir, "state", "machine-instances")
	if err := os.WriteFile(list, []byte("0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := f.startRefused("with a garbled machine-instances"); !strings.Contains(msg, list) || !strings.Contains(msg, "remove it") {
		t.Errorf("a garbled machine-instances: the refusal does not name it and its remedy: %s", msg)
	}
}

// A state directory path that names a regular file (writable by all)
// refuses the start.
func TestE2EFaultStateDirNotADirectoryRefused(t *testing.T) {
	f := newStoreFleet(t)
	file := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(file, 0o666)
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true,
		Env: []string{"DELEGATEOS_STATE_DIR=" + file}, WantExit: func(code int) bool { return code == 2 }})
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatalf("a proxy whose state directory %s is a file started", file)
	}
	if msg := p.Stderr.String(); !strings.Contains(msg, file) {
		t.Errorf("the refusal does not name the state directory %s: %s", file, msg)
	}
}

// A proxy killed (kill -9) while it folds a killed proxy's live record
// (the record's flock held, the counts file not yet written) leaves the
// record: the next start folds it, and finds the store gone back. Machine
// 1's proxy is killed within the second of its last 10 calls (the test
// holds the counts file's lock, as the killed-counts test does); Redis
// loses the same writes; proxy B starts, takes the dead record and blocks
// on the counts file's lock, and is killed there; proxy C, started after,
// refuses store_reset.
func TestE2EFaultProxyKilledMidFoldLeavesTheRecord(t *testing.T) {
	f := newStoreFleet(t)
	n, m, snap, lock := f.killedWithinTheSecond(func() (*mcptest.Process, *mcptest.Session) {
		return f.start(f.a, "", func(int) bool { return true }) // killed
	}, func() string { return f.seenFiles()[0] })
	defer lock.Close()
	record := f.deadRecord(f.seenFiles()[0])
	f.restore(snap)
	pb := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, WantExit: func(int) bool { return true }})
	held := func() bool { return recordLocked(record) }
	mcptest.Eventually(t, "proxy B to hold the dead record's lock (folding it)", held)
	if err := pb.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	pb.WaitExit(mcptest.WaitTimeout)
	mcptest.Eventually(t, "proxy B's lock on the record to go with it", func() bool { return !held() })
	lock.Close()
	pc, sc := f.start(f.a, "", nil)
	more, typ, detail := drain(t, sc, 40)
	f.sameAsUpstreams([]*mcptest.Process{pc}, more)
	if more != 0 || typ != string(gate.StoreReset) {
		t.Errorf("machine 1 made %d calls, killed within the second of the last %d, Redis back to %d, a proxy killed while folding its record: the next proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset", n+m, m, n, more, n+m+more, typ, detail)
	}
}

// Proxies started at once on a fresh state directory and a fresh store
// (stdio proxies launched together by a client, serve instances started
// by one unit file): the machine ID, the list of instances, the store's
// identity and each proxy's live record are made by several at once.
// Every proxy starts and forwards its calls; the directory names one
// machine and one instance.
func TestE2EFaultProxiesStartingAtOnce(t *testing.T) {
	f := newStoreFleet(t)
	var ps []*mcptest.Process
	for range 6 {
		ps = append(ps, f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a}))
	}
	var total int64
	for i, p := range ps {
		n, typ, detail := drain(t, p.Connect(mcptest.SessionOptions{}), 2)
		if n != 2 {
			t.Errorf("proxy %d of 6 started at once: %d calls forwarded, then %s: %s", i, n, typ, detail)
		}
		total += n
	}
	f.sameAsUpstreams(ps, total)
	state := filepath.Join(f.e.Dir, "state")
	b, err := os.ReadFile(filepath.Join(state, "machine-instances"))
	if err != nil || strings.Count(string(b), "\n") != 1 {
		t.Errorf("machine-instances after 6 proxies of one host started at once: %q %v; want one instance", b, err)
	}
	if live, _ := filepath.Glob(filepath.Join(state, "*.live.*")); len(live) != len(ps) {
		t.Errorf("%d live records for %d running proxies: %v", len(live), len(ps), live)
	}
}
