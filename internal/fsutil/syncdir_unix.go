//go:build unix

package fsutil

import "os"

// SyncDir makes a rename or a file creation in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
