//go:build unix && !linux

package toolsfile

import "syscall"

// procAttr puts a process in a group of its own; there is no parent-death signal
// outside Linux.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
