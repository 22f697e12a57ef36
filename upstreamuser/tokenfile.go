package upstreamuser

import (
	"fmt"
	"os"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// CheckTokenFile looks at a file holding a secret (a session token, an
// OAuth grant) before it is read. With as, a file the upstream user can
// read is an error, since keeping the token from it is the point. It
// returns what to warn about: a file group or others can read, or that
// another user owns (and so can replace). A file that cannot be looked at
// is neither: reading it reports why.
func CheckTokenFile(path string, as *User) (warnings []string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil
	}
	mode := fi.Mode().Perm()
	if as != nil && as.MayAccess(path, Read) {
		return nil, fmt.Errorf("the upstream user %s can read this file (mode %04o), so it could use the session token: make it readable by the proxy's user only (chmod 600 %s), in a directory the upstream user cannot write", as.Name(), mode, path)
	}
	if mode&0o077 != 0 {
		warnings = append(warnings, fmt.Sprintf("the token file is readable by group or others (mode %04o): chmod 600 %s", mode, path))
	}
	if _, _, uid, ok := fsutil.ID(fi); ok && int(uid) != os.Geteuid() {
		warnings = append(warnings, fmt.Sprintf("the token file belongs to uid %d, not to the proxy's user (uid %d): its owner can replace the token; chown it to the proxy's user", uid, os.Geteuid()))
	}
	return warnings, nil
}
