//go:build unix

package proxy_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// livePrefix is the start of the names of the live records of the
// fleet's store in the test's state directory (a proxy's nonce and a
// number follow), after one call made it.
func (f *fleet) livePrefix() string {
	f.t.Helper()
	p, s := f.start(f.a, "", nil)
	if n, typ, detail := drain(f.t, s, 1); n != 1 {
		f.t.Fatalf("the first call was refused: %s: %s", typ, detail)
	}
	stopProxy(f.t, p)
	return strings.TrimSuffix(f.seenFiles()[0], ".seen.json") + ".live."
}

// A live record cut to between 256 and 272 bytes whose header names
// an identity of 255 bytes: parseLive reads the machine ID's length at
// b[17+il] before it checks the header fits, and the proxy panics (index
// out of range) at every start, instead of refusing with a message that
// names the file. A record is a file of the state directory, bytes the
// proxy did not write in this run (a disk error, a crash, a tool): it
// must be refused, never crash the proxy (and parseLive has no fuzz
// target, which would have found it) (red team 6, RT6-2; held since
// parseLive checks the header fits first, FuzzParseLive).
func TestE2EFaultCutLiveRecordRefused(t *testing.T) {
	f := newStoreFleet(t)
	prefix := f.livePrefix()
	b := make([]byte, 256)
	copy(b, "DOSLIVE1")
	binary.NativeEndian.PutUint64(b[8:], 1)
	b[16] = 255
	rec := prefix + "cut.1"
	if err := os.WriteFile(rec, b, 0o600); err != nil {
		t.Fatal(err)
	}
	msg := f.startRefused("with a cut live record")
	if strings.Contains(msg, "panic") || !strings.Contains(msg, rec) {
		t.Errorf("a live record cut to 256 bytes: the proxy's start did not refuse it naming the file, it said: %s", msg)
	}
}

// A dead live record replaced by a symlink to a FIFO (or any file
// that is not a regular one: a device, a socket's path): deadLive opens
// it following the link, takes its flock and reads it with os.ReadFile,
// which blocks for ever on a FIFO with no writer. The proxy's start
// hangs: neither serving nor refusing (a symlink to /dev/zero would read
// until memory runs out). Only the state directory's owner can plant
// it, but a start that hangs is a wedge (red team 6, RT6-3). Held:
// records are opened O_NOFOLLOW|O_NONBLOCK, anything but a regular file
// (fstat) is refused naming it, and at most its size is read from the
// descriptor opened.
func TestE2EFaultLiveRecordSymlinkToFIFORefused(t *testing.T) {
	f := newStoreFleet(t)
	prefix := f.livePrefix()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, prefix+"fifo.1"); err != nil {
		t.Fatal(err)
	}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(int) bool { return true }})
	t.Cleanup(func() { p.Cmd.Process.Kill() })
	// A start refused takes well under a second; 15 s is a hang.
	if !p.WaitExit(15 * time.Second) {
		t.Errorf("a live record that is a symlink to a FIFO: the proxy neither started nor refused in 15 s (its start hangs reading it)")
	}
}

// The counts file, the list of instances, the machine's ID and the index
// of the store's identity replaced by symbolic links to a FIFO: read as a live record is (not following the link, not
// waiting on the FIFO), each refuses the start naming the file, where
// following it would hang the start for ever.
func TestE2EFaultCountsFileSymlinkToFIFORefused(t *testing.T) {
	f := newStoreFleet(t)
	f.livePrefix() // one call made: the counts file written
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	all, err := filepath.Glob(filepath.Join(f.e.Dir, "state", "redis-*.json"))
	var idx []string
	for _, p := range all {
		if !strings.HasSuffix(p, ".seen.json") && !strings.HasSuffix(p, ".ended.json") && !strings.HasSuffix(p, ".revocations.json") {
			idx = append(idx, p)
		}
	}
	if err != nil || len(idx) != 1 {
		t.Fatalf("the index of the store's identity: %v %v", idx, err)
	}
	for _, file := range []string{f.seenFiles()[0], filepath.Join(f.e.Dir, "state", "machine-instances"), filepath.Join(f.e.Dir, "state", "machine-id"), idx[0]} {
		saved, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(fifo, file); err != nil {
			t.Fatal(err)
		}
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, LogToStderr: true, WantExit: func(int) bool { return true }})
		t.Cleanup(func() { p.Cmd.Process.Kill() })
		// A start refused takes well under a second; 15 s is a hang.
		if !p.WaitExit(15 * time.Second) {
			t.Errorf("%s a symlink to a FIFO: the proxy neither started nor refused in 15 s (its start hangs reading it)", file)
		} else if p.ExitCode() != 2 || !strings.Contains(p.Stderr.String(), file) {
			t.Errorf("%s a symlink to a FIFO: exit %d, want 2 naming it: %s", file, p.ExitCode(), p.Stderr.String())
		}
		os.Remove(file)
		if err := os.WriteFile(file, saved, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
