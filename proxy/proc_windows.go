//go:build windows

package proxy

import (
	"os"
	"os/exec"
)

func terminate(p *os.Process) error { return p.Kill() }

func setProcAttr(*exec.Cmd) {}
