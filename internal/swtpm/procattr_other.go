//go:build !linux

package swtpm

import "syscall"

// procAttr has nothing to add where the kernel cannot kill a child with its parent; Stop in
// t.Cleanup still ends swtpm.
func procAttr() *syscall.SysProcAttr { return nil }
