package sandbox_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// guardParentEnv, when set, makes the test binary a parent that starts a shell whose
// child sleeps, in a group of its own, has the guard watch the group, prints the
// shell's pid and its child's, and waits to be killed.
const guardParentEnv = "TOOLFLEET_SANDBOX_GUARD_PARENT"

func guardParent() int {
	cmd := exec.Command("/bin/sh", "-c", "sleep 600 & echo $$ $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	var pids string
	if err == nil {
		pids, err = bufio.NewReader(out).ReadString('\n')
	}
	if err == nil {
		_, err = sandbox.Guard(cmd.Process.Pid)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(pids) // only now: the group is guarded
	_ = cmd.Wait()  // killed with its group: the parent is killed first
	return 0
}

// A process group under the guard dies with the process that asked for it, SIGKILL
// included: the shell and the child it started (which no parent-death signal reaches).
func TestGuardKillsTheGroupWhenItsProcessDies(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), guardParentEnv+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("the parent said nothing: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("the parent said %q", line)
		}
		pids = append(pids, pid)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// The guard is the launcher program TestMain built, not a re-exec of the parent.
	if exe := guardExe(t, parent.Process.Pid); exe != os.Getenv(sandbox.LauncherEnv) {
		t.Errorf("the guard runs %q, want the launcher program %q", exe, os.Getenv(sandbox.LauncherEnv))
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait() // killed: its end says nothing
	for _, pid := range pids {
		natstest.Eventually(t, 30*time.Second, fmt.Sprintf("process %d of the guarded group to end with its parent", pid),
			func() bool { return !running(pid) })
	}
}

// running reports whether pid is a process that is neither gone nor a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// guardExe is the program of parent's guard: its child (of any of its threads) whose
// argv is the guard's.
func guardExe(t *testing.T, parent int) string {
	t.Helper()
	lists, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	for _, list := range lists {
		b, _ := os.ReadFile(list) // a thread that ended meanwhile has none
		children = append(children, strings.Fields(string(b))...)
	}
	for _, pid := range children {
		if argv, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil && string(argv) == "toolfleet-process-guard\x00" {
			exe, err := os.Readlink("/proc/" + pid + "/exe")
			if err != nil {
				t.Fatal(err)
			}
			return exe
		}
	}
	t.Fatalf("no guard among the children of %d (%s)", parent, children)
	return ""
}
