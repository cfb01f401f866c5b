package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// LauncherName is the file name of the launcher program, cmd/toolfleet-sandbox:
// [Command] uses the one installed beside the running binary.
const LauncherName = "toolfleet-sandbox"

// LauncherEnv names the environment variable that names the launcher program (a path,
// or a name looked up in PATH); it takes the place of [LauncherName] beside the running
// binary. Empty is the same as unset.
const LauncherEnv = "TOOLFLEET_SANDBOX_LAUNCHER"

// SelfLauncher is the running binary, whatever became of its file since it started:
// [Launcher] returns it where sandboxed programs start through a re-exec of it.
const SelfLauncher = "/proc/self/exe"

// probeArg is the argument the launcher program is run with, as the program of its own
// probe: confined, it checks that it is and answers probeAnswer.
const probeArg = "toolfleet-sandbox-probe"

// probeTimeout bounds a probe: a launcher that hangs is not used.
const probeTimeout = 10 * time.Second

// probeAnswer is what a launcher program speaking this protocol answers to its probe.
func probeAnswer() string { return "toolfleet-sandbox protocol " + launchProtocol + " confined\n" }

// launchers holds the launcher chosen for each value of [LauncherEnv] ("": the one
// beside the running binary): a launcher program is probed once per process.
var launchers struct {
	mu     sync.Mutex
	chosen map[string]launcherChoice
}

type launcherChoice struct {
	path string
	err  error
}

// beside is the launcher program's path beside the running binary ("" where the
// running binary's path is unknown).
var beside = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Join(filepath.Dir(exe), LauncherName)
})

// Launcher returns the program [Command] starts sandboxed programs through: the
// launcher program named by [LauncherEnv], else the one beside the running binary
// ([LauncherName]), else the running binary itself, started again ([SelfLauncher]: the
// launcher since [Init] runs first in it). A program of its own starts without the
// running binary's package inits (tens of milliseconds for an executor's). The guard
// ([Guard]) runs it too.
//
// A launcher program is probed, once per process, before it is used: it must run
// itself confined and answer in this build's launch protocol. One that fails (missing,
// broken, of another version) is not used: Launcher returns [SelfLauncher] and an
// error that says why, for the caller to warn of at start. A program is never run less
// confined for it.
func Launcher() (path string, notUsed error) {
	named := os.Getenv(LauncherEnv)
	launchers.mu.Lock()
	defer launchers.mu.Unlock()
	if c, ok := launchers.chosen[named]; ok {
		return c.path, c.err
	}
	c := chooseLauncher(named)
	if launchers.chosen == nil {
		launchers.chosen = map[string]launcherChoice{}
	}
	launchers.chosen[named] = c
	return c.path, c.err
}

// chooseLauncher probes the launcher program named (or the one beside the running
// binary: named is ""), and says which launcher to use.
func chooseLauncher(named string) launcherChoice {
	path, how := beside(), "beside the running binary"
	if named == "" {
		if path == "" {
			return launcherChoice{path: SelfLauncher}
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return launcherChoice{path: SelfLauncher}
		}
	} else {
		how = LauncherEnv
		var err error
		if path, err = exec.LookPath(named); err == nil {
			path, err = filepath.Abs(path)
		}
		if err != nil {
			return launcherChoice{path: SelfLauncher, err: fmt.Errorf("sandbox: the launcher %s=%s is not used: %w", LauncherEnv, named, err)}
		}
	}
	if err := probeLauncher(path); err != nil {
		return launcherChoice{path: SelfLauncher, err: fmt.Errorf("sandbox: the launcher %s (%s) is not used: %w", path, how, err)}
	}
	return launcherChoice{path: path}
}

// probeLauncher has the launcher program at path run itself, under the read-only policy
// (with the network where the kernel cannot deny it: the probe opens no socket), and
// checks its answer: it starts, speaks this build's protocol, and confines.
func probeLauncher(path string) error {
	p := ReadOnly()
	if abi, _ := ABI(); abi < p.MinABI() {
		p.Network = true
	}
	if err := checkKernel(p); err != nil {
		return fmt.Errorf("it cannot be probed: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd, err := launchCommand(ctx, path, p, path, []string{probeArg})
	if err != nil {
		return err
	}
	// Nothing granted but the system paths and the launcher itself: the probe checks
	// that it cannot list /.
	cmd.Dir, cmd.Env = "/dev", []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer in %v", probeTimeout)
		}
		if said := strings.TrimSpace(stderr.String()); said != "" {
			err = fmt.Errorf("%w: %s", err, said)
		}
		return fmt.Errorf("its probe failed: %w", err)
	}
	if got, want := stdout.String(), probeAnswer(); got != want {
		return fmt.Errorf("its probe answered %q, want %q (a launcher of another build?)", strings.TrimSpace(got), strings.TrimSpace(want))
	}
	return nil
}
