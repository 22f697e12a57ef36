//go:build !unix || race

package stdio

import "io"

// RawReader returns r: raw system calls are a Unix relay's, and not under
// the race detector (see raw_unix.go).
func RawReader(r io.Reader) io.Reader { return r }

// RawWriter returns w.
func RawWriter(w io.Writer) io.Writer { return w }
