//go:build !unix

package revocation

// syncDir does nothing where a directory cannot be opened and synced
// (Windows); the rename itself is what the file system journals.
func syncDir(string) error { return nil }
