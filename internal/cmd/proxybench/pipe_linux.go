package main

import (
	"os"
	"syscall"
)

// blockingPipe returns a pipe whose ends are in blocking mode: os.NewFile
// leaves a blocking descriptor out of the runtime's poller.
func blockingPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}
