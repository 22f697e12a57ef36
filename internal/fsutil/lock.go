package fsutil

import "errors"

// ErrLocked is returned (wrapped) by TryLock when another open file, in this
// process or another, holds the lock.
var ErrLocked = errors.New("lock is held by another process or open file")
