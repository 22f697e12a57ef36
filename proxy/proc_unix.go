//go:build unix

package proxy

import (
	"os"
	"os/exec"
	"syscall"
)

func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

func setProcAttr(cmd *exec.Cmd) { setPdeathsig(cmd) }
