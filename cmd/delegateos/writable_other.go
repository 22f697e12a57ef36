//go:build !unix

package main

// notWritable is not known here: nothing is reported.
func notWritable(path string, dirToo bool) error { return nil }
