package upstreamuser

import (
	"fmt"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// The access User.MayAccess asks about, as in a mode's bits.
const (
	Read    uint32 = 4
	Write   uint32 = 2
	Execute uint32 = 1
)

// A Store is state the gate decides by, which the upstream user must not
// be able to change: it could revoke revocations, reset spend or reopen
// ended delegations.
type Store struct {
	// What names it in messages: "the spend store".
	What string
	// Path is its file, or its redis:// or rediss:// URL; "" for none.
	Path string
	// OnCommandLine says Path was given on the command line, where every
	// local user can read it (ps, /proc/PID/cmdline).
	OnCommandLine bool
}

// CheckFiles refuses the stores kept in files (Redis URLs are skipped:
// see CheckRedis) that u could change or replace, through the file or a
// directory above it.
func (u *User) CheckFiles(stores []Store) error {
	for _, s := range stores {
		if s.Path != "" && !redisconn.IsURL(s.Path) && u.MayModify(s.Path) {
			return fmt.Errorf("the upstream user could change or replace %s %s (through it or a directory above it): make it and its directories writable by the proxy's user only, or set the sticky bit on a shared directory", s.What, s.Path)
		}
	}
	return nil
}

// CheckRedis refuses the Redis stores of a gate whose upstream runs as u
// on the same machine: u reaches whatever Redis the gate reaches, and
// could erase spend, revocations or endings there, unless Redis asks for
// a password u cannot read. A password on the command line is readable by
// every local user, and one in the policy file (policyFile, "" for none)
// by whoever can read the file.
func (u *User) CheckRedis(stores []Store, policyFile string) error {
	for _, s := range stores {
		if !redisconn.IsURL(s.Path) {
			continue
		}
		o, err := redisconn.Options(s.Path)
		if err != nil {
			continue // refused with its reason when it is opened
		}
		shown := redisconn.Redact(s.Path)
		switch {
		case o.Password == "":
			return fmt.Errorf("%s %s has no password, so the upstream user could connect to it and change it (erase spend, drop revocations): make Redis require one (requirepass or an ACL user) and give it in the URL, in a policy file only the proxy's user can read", s.What, shown)
		case s.OnCommandLine:
			return fmt.Errorf("the password of %s %s is on the command line, where every local user can read it (ps, /proc/PID/cmdline), the upstream user included: give the URL in a policy file only the proxy's user can read", s.What, shown)
		case policyFile != "" && u.MayAccess(policyFile, Read):
			return fmt.Errorf("the upstream user can read the policy file %s, which holds the password of %s %s: make it readable by the proxy's user only (chmod 600)", policyFile, s.What, shown)
		}
	}
	return nil
}
