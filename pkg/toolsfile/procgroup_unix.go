//go:build unix

package toolsfile

import (
	"errors"
	"os/exec"
	"syscall"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// startInGroup makes the command the leader of a new process group that dies with the
// executor (see procAttr), running as the user as when set, and has a canceled context
// kill the whole group, not just the leader.
func startInGroup(cmd *exec.Cmd, as *sandbox.User) {
	cmd.SysProcAttr = procAttr()
	if as != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: as.UID, Gid: as.GID, Groups: []uint32{}}
	}
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
	cmd.SysProcAttr = procAttr()
}

// guardGroup has the started command's process group killed when the executor dies,
// SIGKILL included, with everything in it (sandbox.Guard): call release once the group
// is killed. In a program that did not call sandbox.Init, or outside Linux, there is
// no guard, and only the leader's parent-death signal (Linux) holds.
func guardGroup(cmd *exec.Cmd) (release func(), err error) {
	release, err = sandbox.Guard(cmd.Process.Pid)
	if errors.Is(err, sandbox.ErrNoInit) || errors.Is(err, sandbox.ErrUnsupported) {
		return func() {}, nil
	}
	return release, err
}
