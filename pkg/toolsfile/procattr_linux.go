//go:build linux

package toolsfile

import "syscall"

// procAttr puts a process in a group of its own, and has the kernel kill it when the
// thread that started it ends. Go's runtime never ends a thread while the executor
// lives, except one that a goroutine locked and left locked: run keeps the thread that
// starts a command locked to its goroutine until the command has been waited for, so
// that no one else can end it meanwhile (golang/go#27505).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
