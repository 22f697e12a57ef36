//go:build !unix

package fsutil

import "os"

// OpenRegular opens path for reading; the caller checks the opened file's
// mode.
func OpenRegular(path string) (*os.File, error) { return os.Open(path) }
