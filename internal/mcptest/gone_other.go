//go:build !unix

package mcptest

// gone cannot tell here whether a process exists: it says it does not.
func gone(int) bool { return true }

func kill(int) {}
