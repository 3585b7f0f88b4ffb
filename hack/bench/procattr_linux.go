package main

import "syscall"

// childProcAttr makes a child process (swtpm) die with the bench, even when the bench is
// killed or exits through fail.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
