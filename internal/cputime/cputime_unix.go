//go:build unix

package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Report reports the process's CPU time per operation (user and system,
// every thread, the garbage collector's included) as cpu-ns/op: on a busy
// machine ns/op counts the time the benchmark waited for a core, this
// does not.
func Report(b *testing.B) func() {
	start := processCPU()
	return func() {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
