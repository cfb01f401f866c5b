//go:build !unix

package toolsfile

import "os/exec"

// startInGroup: without process groups, a canceled context kills the process alone.
func startInGroup(cmd *exec.Cmd) {}

// killGroup has nothing to do without process groups.
func killGroup(cmd *exec.Cmd) {}

// setGroup: without process groups, the process alone is ended.
func setGroup(cmd *exec.Cmd) {}
