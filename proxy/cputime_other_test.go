//go:build !unix

package proxy

import "testing"

// reportCPU reports nothing where getrusage is not available.
func reportCPU(*testing.B) func() { return func() {} }
