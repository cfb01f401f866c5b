//go:build unix

package toolsfile

import (
	"os/exec"
	"syscall"
)

// startInGroup makes the command the leader of a new process group and has a canceled
// context kill the whole group, not just the leader.
func startInGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills what is left of the command's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// setGroup makes the command the leader of a new process group, for a process that
// outlives one call (an MCP server); killGroup ends what is left of it.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
