package swtpm

import "syscall"

// procAttr makes the kernel kill swtpm when the test process dies, so that a test binary
// killed by a timeout does not leave swtpm running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
