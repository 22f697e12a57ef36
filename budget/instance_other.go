//go:build !unix

package budget

import "os"

// dirIdentity is empty without a device and inode to read: two copies of
// a state directory on one host are then one instance.
func dirIdentity(string) string { return "" }

// fileOwner is not known without a Unix owner.
func fileOwner(os.FileInfo) (owner, me int, ok bool) { return 0, 0, false }
