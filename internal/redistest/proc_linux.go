package redistest

import "syscall"

// procAttr makes the server die with the process that started it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
