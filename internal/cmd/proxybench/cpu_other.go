//go:build !linux

package main

import "time"

// cpuTime is not measured where /proc is not available.
func cpuTime(pid int) (self, descendants time.Duration, ok bool) { return 0, 0, false }

// syscalls is not counted where /proc is not available.
func syscalls(pid int) (reads, writes int64, ok bool) { return 0, 0, false }

// switches is not counted where /proc is not available.
func switches(pid int) (int64, bool) { return 0, false }
