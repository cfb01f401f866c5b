// Package sandboxtest builds the sandbox launcher program (cmd/toolfleet-sandbox) for
// the tests of the packages that run sandboxed commands, so that they run through it as
// a deployed executor does.
package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// launcherPkg is the launcher program's package.
const launcherPkg = "github.com/toolfleet/toolfleet/cmd/toolfleet-sandbox"

// Build builds the launcher program into dir, static as the image ships it, with the
// go build flags given, and returns its path.
func Build(dir string, flags ...string) (string, error) {
	bin := filepath.Join(dir, sandbox.LauncherName)
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), launcherPkg)...)
	// Without cgo, as in the Dockerfile: a binary that links libc starts ~5 ms (CPU)
	// slower on a loaded machine.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", launcherPkg, err, out)
	}
	return bin, nil
}

// UseLauncher, for a TestMain, builds the launcher program into a new temporary
// directory and names it in sandbox.LauncherEnv, which the processes the tests start
// inherit: every sandboxed command (and the process guard) then starts through it.
// Call cleanup, which removes the directory, once the tests have run.
func UseLauncher() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "toolfleet-sandbox-")
	if err != nil {
		return nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bin, err := Build(dir)
	if err == nil {
		err = os.Setenv(sandbox.LauncherEnv, bin)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}
