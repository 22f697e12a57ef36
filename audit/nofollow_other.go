//go:build !unix

package audit

import "os"

// oNoFollow: without O_NOFOLLOW, Open checks the file it opened is regular.
const oNoFollow = 0

// lockLog does nothing here: the lock file alone guards the log.
func lockLog(*os.File) error { return nil }
