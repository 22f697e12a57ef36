//go:build !unix

package audit

// oNoFollow: without O_NOFOLLOW, Open checks the file it opened is regular.
const oNoFollow = 0
