//go:build !unix

package budget

// dirIdentity is empty without a device and inode to read: two copies of
// a state directory on one host are then one instance.
func dirIdentity(string) string { return "" }
