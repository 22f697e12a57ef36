package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// cpuTime returns the CPU time used so far by the process pid (every
// thread) and, separately, by all its descendants. On a machine whose
// cores the client, the hop and the upstream share, a hop's CPU per call
// is what its throughput is paid with; the clock-tick counters of
// /proc/PID/stat are too coarse for a phase of a fraction of a second, so
// the nanosecond run times of /proc/PID/task/TID/schedstat are summed.
func cpuTime(pid int) (self, descendants time.Duration, ok bool) {
	self, children, ok := taskTimes(pid)
	if !ok {
		return 0, 0, false
	}
	for len(children) > 0 {
		c := children[len(children)-1]
		children = children[:len(children)-1]
		t, more, ok := taskTimes(c)
		if ok {
			descendants += t
			children = append(children, more...)
		}
	}
	return self, descendants, true
}

// taskTimes sums the run time of pid's threads and lists its children.
func taskTimes(pid int) (time.Duration, []int, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, nil, false
	}
	var total time.Duration
	var children []int
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		f := bytes.Fields(b)
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, nil, false
		}
		total += time.Duration(ns)
		b, _ = os.ReadFile(filepath.Join(dir, t.Name(), "children"))
		for _, c := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(c)); err == nil {
				children = append(children, n)
			}
		}
	}
	return total, children, true
}

// syscalls returns how many read and write system calls the process pid
// has made (/proc/PID/io); with the run time it shows whether a hop pays
// per call in its own work or in system calls.
func syscalls(pid int) (reads, writes int64, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "io"))
	if err != nil {
		return 0, 0, false
	}
	var gotR, gotW bool
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, found := bytes.Cut(line, []byte(": "))
		if !found {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			continue
		}
		switch string(k) {
		case "syscr":
			reads, gotR = n, true
		case "syscw":
			writes, gotW = n, true
		}
	}
	return reads, writes, gotR && gotW
}

// switches returns how many times the threads of process pid have been
// switched off a CPU (/proc/PID/task/TID/status, voluntary and not): a hop
// that sleeps and is woken per batch of calls pays the kernel's scheduler
// each time.
func switches(pid int) (int64, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue // the thread exited
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			k, v, found := bytes.Cut(line, []byte(":"))
			if !found || !bytes.HasSuffix(k, []byte("ctxt_switches")) {
				continue
			}
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				total += n
			}
		}
	}
	return total, true
}
