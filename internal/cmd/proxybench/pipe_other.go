//go:build !linux

package main

import "os"

// blockingPipe is an ordinary pipe where pipe2 is not available.
func blockingPipe() (r, w *os.File, err error) { return os.Pipe() }
