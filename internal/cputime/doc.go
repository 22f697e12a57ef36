// Package cputime reports a benchmark's CPU time per operation beside its
// wall time: on a shared machine ns/op counts the time the benchmark
// waited for a core, cpu-ns/op does not.
package cputime
