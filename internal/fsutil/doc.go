// Package fsutil holds the few file-system operations that state guarding
// money or authority relies on to survive a crash or a second process: an
// atomic file replacement (temporary file, fsync, rename, fsync of the
// directory), the directory fsync on its own, exclusive locks on a lock
// file, blocking or not, and a file's Stamp, taken through its path on
// every decision without allocating, to tell whether it changed.
//
// Where flock(2) exists the lock belongs to the open file, so it excludes
// other goroutines of this process as well as other processes, and the
// kernel drops it when the process dies. Elsewhere (Windows) a lock is a file
// created exclusively, which a process that crashes leaves behind; the
// errors then say how to clear it.
package fsutil
