//go:build !(linux && (amd64 || arm64))

package revocation

// statDoesNotAllocate: fsutil.StatPath.Stat allocates the path's C string
// or a FileInfo here.
const statDoesNotAllocate = false
