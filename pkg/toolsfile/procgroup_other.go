//go:build !unix

package toolsfile

import (
	"os/exec"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// startInGroup: without process groups, a canceled context kills the process alone;
// runAs is refused at registration, as is every user switch outside Unix.
func startInGroup(cmd *exec.Cmd, as *sandbox.User) {}

// killGroup has nothing to do without process groups.
func killGroup(cmd *exec.Cmd) {}

// setGroup: without process groups, the process alone is ended.
func setGroup(cmd *exec.Cmd) {}

// guardGroup: no guard without process groups.
func guardGroup(cmd *exec.Cmd) (release func(), err error) { return func() {}, nil }
