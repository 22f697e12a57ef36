package budget

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxStateLinks bounds the symbolic links followed on the way to a state
// directory (the kernel's own limit is 40).
const maxStateLinks = 40

// checkStatePath is an error when another local user could replace the
// state directory dir (an absolute path) by changing a directory or a
// symbolic link on its way, as sshd's StrictModes checks a user's files:
// every directory from / down to dir, those reached through symbolic
// links included, is owned by this proxy's user or by root and is not
// writable by its group or by other users unless it is sticky (/tmp:
// there another user can neither rename nor replace an entry it does not
// own, and the entry's owner is checked in turn); every symbolic link on
// the way is owned by this user or by root. A directory another user can
// write lets them rename the state directory away (the next proxy makes
// a fresh one: a new machine, which does not see a store gone back to an
// older snapshot) or put another in its place.
//
// What it checks is what the proxy uses afterwards: only this user or
// root can change any of it, so it cannot be swapped between the check
// and the use by another user. The walk stops at the first component
// that does not exist: the proxy makes the rest (MakeStateDir, which
// checks again what it finds made meanwhile). It checks nothing where
// file owners are not known (not Unix).
func checkStatePath(dir string) error {
	if fi, err := os.Lstat("/"); err != nil {
		return fmt.Errorf("the state directory %s: / cannot be read: %w", dir, err)
	} else if _, _, ok := fileOwner(fi); !ok {
		return nil
	}
	links := 0
	_, err := walkStatePath(dir, "/", dir, &links)
	return err
}

// walkStatePath checks the components of path from cur (a real path: no
// symbolic link in it, already checked) down, following symbolic links,
// and returns the real path it leads to ("" when a component does not
// exist, or is not a directory: that is refused where it is used).
func walkStatePath(dir, cur, path string, links *int) (string, error) {
	if filepath.IsAbs(path) {
		cur = "/"
	}
	if err := checkStateComponent(dir, cur, false); err != nil {
		return "", err
	}
	for _, c := range strings.Split(path, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur is real: its parent is lexical
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("the state directory %s: %s on its path cannot be read: %w", dir, next, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if err := checkStateComponent(dir, next, true); err != nil {
				return "", err
			}
			if *links++; *links > maxStateLinks {
				return "", fmt.Errorf("the state directory %s: more than %d symbolic links on its path; give its real path", dir, maxStateLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", fmt.Errorf("the state directory %s: the symbolic link %s on its path cannot be read: %w", dir, next, err)
			}
			real, err := walkStatePath(dir, cur, target, links)
			if real == "" || err != nil {
				return "", err
			}
			cur = real
			continue
		}
		if !fi.IsDir() {
			return "", nil
		}
		if err := checkStateComponent(dir, next, false); err != nil {
			return "", err
		}
		cur = next
	}
	return cur, nil
}

// checkStateComponent checks one directory (or, with link, symbolic
// link) p on the way to the state directory dir.
func checkStateComponent(dir, p string, link bool) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("the state directory %s: %s on its path cannot be read: %w", dir, p, err)
	}
	const risk = "another local user could rename the state directory away or put another in its place, and so make this machine forget what it keeps there (its machine ID, the counts of calls it saw, its copies of revocations) and hide a store that lost data"
	what := "the directory"
	if link {
		what = "the symbolic link"
	}
	if owner, me, ok := fileOwner(fi); ok && owner != me && owner != 0 {
		return fmt.Errorf("the state directory %s: %s %s on its path is owned by the user %d, neither this proxy's user %d nor root: %s; set DELEGATEOS_STATE_DIR to a directory whose every parent is this user's or root's", dir, what, p, owner, me, risk)
	}
	if !link && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("the state directory %s: the directory %s on its path is writable by its group or by other users and not sticky (mode %04o): %s; run chmod go-w %s, or set DELEGATEOS_STATE_DIR to a directory whose every parent only its owner can write", dir, p, fi.Mode().Perm(), risk, p)
	}
	return nil
}

// MakeStateDir makes the state directory dir (an absolute path) and the
// directories missing on its way, each 0700, so that none is one another
// user put there: CheckStateDir's walk stops at the first component that
// does not exist, and os.MkdirAll, run after it, takes a directory that
// appeared meanwhile for its own (in a sticky /tmp, another user can make
// /tmp/a, 0777 and theirs, between the check of DELEGATEOS_STATE_DIR=
// /tmp/a/state and the making of it). Here each component is made with
// os.Mkdir; one that exists already (there at the check, or made since
// by someone else) is checked as the walk checks it (owner, mode, a
// symbolic link's owner) before anything is made in it, and the finished
// directory is checked whole again (CheckStateDir) before it is used.
// A directory that exists and passes the check is left as it is.
func MakeStateDir(dir string) error {
	if err := CheckStateDir(dir); err != nil {
		return err
	}
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil // checked just now, whole
	}
	p := ""
	for _, c := range strings.Split(dir, "/") {
		if c == "" || c == "." {
			continue
		}
		p += "/" + c // as the kernel resolves it: no lexical ".."
		if stateMkdirHook != nil {
			stateMkdirHook(p)
		}
		err := os.Mkdir(p, 0o700)
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("the state directory %s cannot be made: %w", dir, err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("the state directory %s: %s on its path cannot be read: %w", dir, p, err)
		}
		link := fi.Mode()&os.ModeSymlink != 0
		if !link && !fi.IsDir() {
			return fmt.Errorf("the state directory %s cannot be made: %s on its path is not a directory", dir, p)
		}
		if err := checkStateComponent(dir, p, link); err != nil {
			return err
		}
	}
	return CheckStateDir(dir)
}

// stateMkdirHook, when set (by tests), is called before each component
// of a state directory's path is made: where another user could make it
// first.
var stateMkdirHook func(path string)
