//go:build !unix

package stdio

import "os"

// Pollable leaves f as it is where descriptors are not Unix ones.
func Pollable(f, stderr *os.File) (*os.File, func()) { return f, func() {} }
