//go:build linux

package proxy_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// The state directory on a full filesystem (red team 6, RT6-4), and the live record, a
// file mapped MAP_SHARED. openLive makes the record by ftruncate (a
// sparse file: no block is allocated) and then stores its header into
// the mapped page; on a full filesystem the page cannot be allocated and
// the store is a SIGBUS, which the Go runtime turns into a crash of the
// whole process ("unexpected fault address", signal SIGBUS). Every raise
// that reaches a page not yet written does the same (a proxy whose
// record grows past its first page: about 40 trees).
//
// Here: a proxy runs with its state directory on a small tmpfs (its own
// mount namespace); the filesystem fills up (a log, another program); an
// operator runs store init --reset (a new generation, which the proxy
// adopts at its next call and opens a new live record for). The proxy's
// next call kills it with SIGBUS: the call gets no answer, its
// reservation stays held, and every session of the process is dropped
// (for serve, every client's). A full disk must not crash the gate: the
// counts file's writes already fail softly there ("a failure is not the
// calls'").
//
// Held: the record's blocks are written (zeros) before they are mapped
// (mapSize), so ENOSPC is an error there, never a SIGBUS at a store.
// Run as root, or in a user namespace of its own otherwise (unshare -U
// -r), to mount the tmpfs.
func TestE2EFaultFullDiskLiveRecordNoSIGBUS(t *testing.T) {
	userns := ""
	if os.Getuid() != 0 {
		userns = "-U -r "
	}
	f := newStoreFleet(t)
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal(err)
	}
	// The proxy, in a mount namespace of its own (gone with it), with its
	// state directory on a 1 MiB tmpfs.
	wrap := filepath.Join(t.TempDir(), "in-tmpfs")
	script := fmt.Sprintf("#!/bin/sh\nexec %s %s-m --propagation private /bin/sh -c 'mount -t tmpfs -o size=1m,mode=0700 rt6 %s && exec \"$@\"' sh %s \"$@\"\n",
		unshare, userns, state, mcptest.Delegateos(t))
	if err := os.WriteFile(wrap, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Bin: wrap, LogToStderr: true,
		Env: []string{"DELEGATEOS_STATE_DIR=" + state}})
	s := p.Connect(mcptest.SessionOptions{})
	if n, typ, detail := drain(t, s, 5); n != 5 {
		t.Fatalf("the proxy's calls: %d forwarded, then %s: %s", n, typ, detail)
	}
	// Its state directory as the proxy sees it: through its root.
	mounted := filepath.Join(fmt.Sprintf("/proc/%d/root", p.Cmd.Process.Pid), state)
	if ms, _ := filepath.Glob(filepath.Join(mounted, "*.live.*")); len(ms) == 0 {
		t.Fatalf("no live record in the proxy's state directory %s", mounted)
	}
	fill, err := os.Create(filepath.Join(mounted, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := fill.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for len(chunk) > 1 { // to the last byte
		chunk = chunk[:len(chunk)/2]
		for {
			if _, err := fill.Write(chunk); err != nil {
				break
			}
		}
	}
	fill.Close()
	if out, errs, code := mcptest.CLI(t, "store", "init", "--store", f.url, "--reset"); code != 0 {
		t.Fatalf("store init --reset: exit %d, %s%s", code, out, errs)
	}
	r := s.Call(t, "echo", map[string]any{"text": "after the disk filled"})
	if r.Err != nil {
		t.Fatalf("the state directory's filesystem full, a new generation adopted: the call got no answer (%v); want an answer, the proxy running", r.Err)
	}
	// The proxy answered; it must also end as a proxy ends when its
	// client closes (status 0), not by a fault: the runtime's report of
	// one is its "fatal error" and "signal SIGBUS" lines on stderr (not
	// the word alone: the test's name is in the paths the proxy logs).
	p.Stdin.Close()
	if !p.WaitExit(mcptest.WaitTimeout) {
		t.Fatal("the proxy did not exit after its client closed")
	}
	if code, errs := p.ExitCode(), p.Stderr.String(); code != 0 || strings.Contains(errs, "signal SIGBUS") || strings.Contains(errs, "fatal error") {
		t.Errorf("the state directory's filesystem full, a new generation adopted: the proxy exited with status %d; want 0, no fault. stderr: %s", code, firstLines(errs, 8))
	}
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, "\n")
}
