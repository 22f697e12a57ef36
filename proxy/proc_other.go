//go:build unix && !linux

package proxy

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
