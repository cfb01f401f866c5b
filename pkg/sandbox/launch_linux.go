//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
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
	if len(os.Args) == 1 && os.Args[0] == guardArg0 {
		os.Exit(runGuard(os.Stdin))
	}
	if len(os.Args) < 3 || os.Args[0] != launcherArg0 {
		return
	}
	err := launch(os.Args[1], os.Args[2], os.Args[2:])
	fmt.Fprintf(os.Stderr, "toolfleet sandbox: %v\n", err)
	os.Exit(ExitSetup)
}

// launch confines this process to the policy and replaces it with prog; it returns only
// on failure. In order: Landlock (on every thread); then, on this thread, which execs
// the program: the bounding set emptied, the user switched (runAs), every other
// capability dropped, the parent-death signal, no_new_privs, the seccomp filter.
func launch(spec, prog string, argv []string) error {
	var s launchSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	p := s.Policy
	abi, _ := ABI() // no Landlock: 0, refused just below
	if err := p.CheckABI(abi); err != nil {
		return err
	}
	if err := CheckSeccomp(); err != nil {
		return err
	}
	filters, err := filterPrograms(p)
	if err != nil {
		return err
	}
	// The executor's thread that started this process; once it is gone, so is the
	// parent-death signal's reason to exist.
	parent := os.Getppid()
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	read := append([]string{prog, cwd}, p.Read...)
	rules := []landlock.Rule{
		landlock.RODirs(systemPaths...).IgnoreIfMissing(),
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
	// Capabilities, the parent-death signal, no_new_privs and seccomp filters belong to
	// a thread: this goroutine keeps its thread, never unlocked, and execs from it.
	runtime.LockOSThread()
	if err := dropBoundingSet(); err != nil {
		return err
	}
	if s.RunAs != nil {
		if err := switchUser(*s.RunAs); err != nil {
			return err
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	// The signal Go set in the child is on the thread that forked (another one, maybe)
	// and a change of user clears it: set it on this one, which becomes the program,
	// and make sure the parent did not die before.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != parent {
		return fmt.Errorf("the executor that started the program is gone")
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := loadFilters(filters); err != nil {
		return err
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

// switchUser makes the process run as u, with no supplementary groups. It needs the
// launcher to be root (CAP_SETUID and CAP_SETGID); the switch clears its capabilities.
func switchUser(u User) error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("runAs %s: drop the supplementary groups: %w", u, err)
	}
	if err := syscall.Setresgid(int(u.GID), int(u.GID), int(u.GID)); err != nil {
		return fmt.Errorf("runAs %s: %w", u, err)
	}
	if err := syscall.Setresuid(int(u.UID), int(u.UID), int(u.UID)); err != nil {
		return fmt.Errorf("runAs %s: %w", u, err)
	}
	return nil
}
