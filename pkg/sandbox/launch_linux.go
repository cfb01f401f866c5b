//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// selfExe is the running binary, whatever became of its file since it started.
const selfExe = "/proc/self/exe"

// ABI returns the Landlock ABI version of the running kernel, 0 and an error where
// Landlock is missing or disabled.
func ABI() (int, error) {
	v, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		return 0, err
	}
	return v, nil
}

// Init makes the running binary able to launch sandboxed programs. Call it first thing
// in main and in TestMain. In the launcher (a process [Command] started) it confines the
// process and execs the program, and never returns; elsewhere it returns at once.
func Init() {
	initialized.Store(true)
	if len(os.Args) < 3 || os.Args[0] != launcherArg0 {
		return
	}
	err := launch(os.Args[1], os.Args[2], os.Args[2:])
	fmt.Fprintf(os.Stderr, "toolfleet sandbox: %v\n", err)
	os.Exit(ExitSetup)
}

// launch confines this process to the policy and replaces it with prog; it returns only
// on failure.
func launch(policy, prog string, argv []string) error {
	var p Policy
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	abi, _ := ABI() // no Landlock: 0, refused just below
	if err := p.CheckABI(abi); err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	read := append([]string{prog, cwd}, p.Read...)
	rules := []landlock.Rule{
		landlock.RODirs(SystemPaths...).IgnoreIfMissing(),
		landlock.RWFiles("/dev/null").IgnoreIfMissing(),
	}
	for _, path := range read {
		r, err := pathRule(path, false)
		if err != nil {
			return err
		}
		rules = append(rules, r)
	}
	for _, path := range p.Write {
		r, err := pathRule(path, true)
		if err != nil {
			return err
		}
		rules = append(rules, r)
	}
	// Everything this library knows how to confine, down to what the kernel has (the
	// minimum was checked above): files, TCP (and UDP from ABI 10) unless allowed,
	// signals and abstract unix sockets outside the domain (ABI 6).
	cfg := landlock.V11
	if p.Network {
		cfg.HandledAccessNet = 0
	}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := syscall.Exec(prog, argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", prog, err)
	}
	return nil
}

// pathRule grants read (and execute) or read-write on path: beneath it for a
// directory, the file alone otherwise (Landlock refuses directory rights on a file).
func pathRule(path string, write bool) (landlock.Rule, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("grant %s: %w", path, err)
	}
	switch {
	case st.IsDir() && write:
		return landlock.RWDirs(path).WithRefer(), nil
	case st.IsDir():
		return landlock.RODirs(path), nil
	case write:
		return landlock.RWFiles(path), nil
	default:
		return landlock.ROFiles(path), nil
	}
}
