//go:build !linux

package upstreamuser

import (
	"errors"
	"os/exec"
)

// User is who the upstream runs as (upstream_user, --upstream-user),
// which only Linux builds support.
type User struct{ name string }

// Resolve refuses: only Linux builds run the upstream as another user.
func Resolve(string) (*User, error) {
	return nil, errors.New("running the upstream as another user is supported on Linux only: run the upstream's command under another user yourself, e.g. with sudo -u USER in the command after --")
}

// CheckCanSwitch is nil: Resolve refuses first.
func CheckCanSwitch() error { return nil }

func (u *User) Name() string                  { return u.name }
func (u *User) String() string                { return u.name }
func (u *User) Prepare(*exec.Cmd) error       { return nil }
func (u *User) MayAccess(string, uint32) bool { return false }
func (u *User) MayModify(string) bool         { return false }
