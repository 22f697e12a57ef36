//go:build linux

package proxy

import (
	"os/exec"
	"syscall"
)

// setPdeathsig asks the kernel to terminate the upstream if the proxy dies
// without shutting it down (killed with SIGKILL, say): no orphans.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
