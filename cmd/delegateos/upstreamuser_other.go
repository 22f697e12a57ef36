//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
)

// upstreamUser is who the upstream runs as under --upstream-user, which
// only Linux builds support.
type upstreamUser struct{ name string }

func resolveUpstreamUser(string) (*upstreamUser, error) {
	return nil, errors.New("running the upstream as another user is supported on Linux only: run the upstream's command under another user yourself, e.g. with sudo -u USER in the command after --")
}

func checkCanSwitch() error { return nil }

func (u *upstreamUser) String() string                { return u.name }
func (u *upstreamUser) prepare(*exec.Cmd) error       { return nil }
func (u *upstreamUser) mayAccess(string, uint32) bool { return false }
func (u *upstreamUser) mayModify(string) bool         { return false }

func fileOwner(os.FileInfo) (int, bool) { return 0, false }
