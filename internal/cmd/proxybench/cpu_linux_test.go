package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// cpuTime counts this process's threads, and a child's work under its
// descendants, not under the process.
func TestCPUTime(t *testing.T) {
	self0, _, ok := cpuTime(os.Getpid())
	if !ok {
		t.Fatal("cpuTime of this process failed")
	}
	// Spin until getrusage has seen 50ms of CPU (on a busy machine that
	// takes longer than 50ms).
	ru0 := rusageCPU(t)
	for rusageCPU(t)-ru0 < 50*time.Millisecond {
	}
	self1, _, _ := cpuTime(os.Getpid())
	if d := self1 - self0; d < 40*time.Millisecond {
		t.Errorf("50ms of CPU by getrusage counted as %v", d)
	}

	// A shell that starts a busy child and waits for it.
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; read x' & wait`)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	var sh, children time.Duration
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if sh, children, ok = cpuTime(cmd.Process.Pid); ok && children > 20*time.Millisecond {
			break
		}
	}
	if children <= 20*time.Millisecond || sh > children {
		t.Errorf("a busy child counted as %v for its descendants and %v for the shell", children, sh)
	}
	if _, _, ok := cpuTime(1 << 30); ok {
		t.Error("cpuTime of a process that does not exist succeeded")
	}
}

func rusageCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
