//go:build linux

package upstreamuser

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// User is who the upstream runs as (upstream_user, --upstream-user):
// another user, so that it cannot read what the proxy's user can (the
// token file, /proc/PID/environ and the memory of the proxy, the spend
// store...).
type User struct {
	spec   string // as given: USER[:GROUP]
	name   string // the user's name, or its uid when it has no entry
	uid    uint32
	gid    uint32
	groups []uint32 // supplementary groups: the user's own
	home   string
}

// Resolve reads USER[:GROUP], each a name or a numeric ID. The
// upstream gets the user's primary group (or GROUP) and the user's
// supplementary groups, nothing of the proxy's. A uid without an entry in
// the user database needs an explicit GROUP. Root, and the proxy's own
// user, are refused: neither isolates anything.
func Resolve(spec string) (*User, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if userPart == "" || (hasGroup && groupPart == "") || strings.ContainsAny(spec, " \t\n") {
		return nil, fmt.Errorf("%q is not USER[:GROUP]: give a user name or uid, optionally with a group name or gid after a colon, e.g. nobody or 65534:65534", spec)
	}
	u := &User{spec: spec, name: userPart, home: "/"}
	known, err := lookupUser(userPart)
	switch {
	case err != nil:
		return nil, err
	case known != nil:
		uid, _ := strconv.ParseUint(known.Uid, 10, 32)
		gid, _ := strconv.ParseUint(known.Gid, 10, 32)
		u.name, u.uid, u.gid = known.Username, uint32(uid), uint32(gid)
		if known.HomeDir != "" {
			u.home = known.HomeDir
		}
		ids, err := known.GroupIds()
		if err != nil {
			return nil, fmt.Errorf("the groups of user %s cannot be listed: %v", known.Username, err)
		}
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				u.groups = append(u.groups, uint32(n))
			}
		}
	default:
		n, _ := strconv.ParseUint(userPart, 10, 32)
		u.uid = uint32(n)
		if !hasGroup {
			return nil, fmt.Errorf("uid %s has no entry in the user database, so it has no group: give one too, e.g. %s:%s", userPart, userPart, userPart)
		}
	}
	if hasGroup {
		gid, err := lookupGroup(groupPart)
		if err != nil {
			return nil, err
		}
		u.gid = gid
	}
	switch {
	case u.uid == 0:
		return nil, fmt.Errorf("%q is root: the upstream would have every right the proxy has; name an unprivileged user, e.g. nobody", spec)
	case int(u.uid) == os.Geteuid():
		return nil, fmt.Errorf("%q is the proxy's own user (uid %d), which isolates nothing: name another user, e.g. nobody", spec, u.uid)
	}
	return u, nil
}

// lookupUser finds a user by name or uid; nil, nil for a numeric uid with
// no entry.
func lookupUser(s string) (*user.User, error) {
	if _, err := strconv.ParseUint(s, 10, 32); err == nil {
		u, err := user.LookupId(s)
		if _, ok := err.(user.UnknownUserIdError); ok {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("uid %s cannot be looked up: %v", s, err)
		}
		return u, nil
	}
	u, err := user.Lookup(s)
	if _, ok := err.(user.UnknownUserError); ok {
		return nil, fmt.Errorf("there is no user %q on this system: name an existing user (e.g. nobody) or create one for the upstream (useradd --system --no-create-home %s)", s, s)
	}
	if err != nil {
		return nil, fmt.Errorf("user %q cannot be looked up: %v", s, err)
	}
	return u, nil
}

// lookupGroup finds a group's gid by name or number; a number with no
// entry is used as it is.
func lookupGroup(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, fmt.Errorf("there is no group %q on this system: name an existing group or a gid", s)
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %q has gid %q, which is not a number", s, g.Gid)
	}
	return uint32(n), nil
}

// Name is the user's name, or its uid when it has no entry.
func (u *User) Name() string { return u.name }

// String names the user for messages.
func (u *User) String() string {
	return fmt.Sprintf("%s (uid %d, gid %d)", u.name, u.uid, u.gid)
}

// environ is the proxy's environment with the variables that describe the
// proxy's user replaced by the upstream user's (HOME, USER, LOGNAME) or
// dropped: they point into the proxy user's home, session or agent sockets.
func (u *User) environ(env []string) []string {
	drop := map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "MAIL": true,
		"XDG_RUNTIME_DIR": true, "XDG_CONFIG_HOME": true, "XDG_DATA_HOME": true, "XDG_CACHE_HOME": true,
		"XDG_STATE_HOME": true, "SSH_AUTH_SOCK": true, "GPG_AGENT_INFO": true, "DBUS_SESSION_BUS_ADDRESS": true}
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+u.home, "USER="+u.name, "LOGNAME="+u.name)
}

// MayAccess reports whether u may access path for want (a combination of
// Read, Write and Execute), by the owner, group and other bits of path
// and the search bit of every directory above it. Access control lists
// and capabilities are not looked at: a "no" can be wrong, a "yes" is
// what the bits grant. Paths that cannot be examined are not accessible.
func (u *User) MayAccess(path string, want uint32) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if !u.permits(dir, Execute) {
			return false
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	return u.permits(abs, want)
}

// MayModify reports whether u could change what the proxy reads at path:
// write the file, or replace it (or create it, if it is missing) through
// a directory on the way to it that u can write, which the sticky bit
// stops only for what u does not own.
func (u *User) MayModify(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return true
	}
	if u.MayAccess(abs, Write) {
		return true
	}
	for child, dir := abs, filepath.Dir(abs); ; child, dir = dir, filepath.Dir(dir) {
		if u.MayAccess(dir, Write|Execute) && (!sticky(dir) || u.owns(dir) || u.owns(child)) {
			return true
		}
		if dir == filepath.Dir(dir) {
			return false
		}
	}
}

func sticky(path string) bool {
	var st syscall.Stat_t
	return syscall.Stat(path, &st) == nil && st.Mode&syscall.S_ISVTX != 0
}

// owns reports whether u owns path (false when it does not exist).
func (u *User) owns(path string) bool {
	var st syscall.Stat_t
	return syscall.Lstat(path, &st) == nil && st.Uid == u.uid
}

// permits checks one file's mode bits for u.
func (u *User) permits(path string, want uint32) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return false
	}
	mode := st.Mode & 0o777
	var bits uint32
	switch {
	case st.Uid == u.uid:
		bits = mode >> 6
	case st.Gid == u.gid || u.inGroup(st.Gid):
		bits = mode >> 3
	default:
		bits = mode
	}
	return bits&7&want == want
}

func (u *User) inGroup(gid uint32) bool {
	for _, g := range u.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// The capabilities (capability.h) the proxy needs to start the upstream
// as another user and to stop it again.
const (
	capKill   = 5
	capSetgid = 6
	capSetuid = 7
)

// CheckCanSwitch makes sure this process may start a process as another
// user (setuid, setgid, setgroups) and signal it afterwards (a SIGTERM at
// shutdown, the signals it passes on), from its effective capabilities.
func CheckCanSwitch() error {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("the proxy's capabilities cannot be read: %v", err)
	}
	var eff uint64
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			found = err == nil
		}
	}
	if !found {
		return fmt.Errorf("the proxy's capabilities cannot be read from /proc/self/status")
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{capSetuid, "CAP_SETUID"}, {capSetgid, "CAP_SETGID"}, {capKill, "CAP_KILL"}} {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	who := fmt.Sprintf("uid %d", os.Geteuid())
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	return fmt.Errorf("running the upstream as another user needs root, or the capabilities CAP_SETUID, CAP_SETGID and CAP_KILL; the proxy runs as %s without %s: start it as root (it drops nothing else: only the upstream changes user), or grant those capabilities to the service that starts it (systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID CAP_KILL)",
		who, strings.Join(missing, ", "))
}

// Prepare makes cmd start as u, in the proxy's working directory, with u's
// home in HOME. It keeps the SysProcAttr already set (the parent-death
// signal).
func (u *User) Prepare(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	groups := u.groups
	if groups == nil {
		groups = []uint32{} // clears the proxy's supplementary groups
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: groups}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = u.environ(env)
	return nil
}
