//go:build linux && (amd64 || arm64)

package revocation

// statDoesNotAllocate: fsutil.StatPath.Stat makes no allocation here.
const statDoesNotAllocate = true
