//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

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
	if code, ok := runRole(os.Args); ok {
		os.Exit(code)
	}
}

// Main is the whole of the launcher program (cmd/toolfleet-sandbox): the launcher,
// the guard, or the answer to its probe, as its arguments say; run by hand, it says
// what it is and exits 2.
func Main() {
	initialized.Store(true)
	if code, ok := runRole(os.Args); ok {
		os.Exit(code)
	}
	if len(os.Args) == 2 && os.Args[1] == probeArg {
		os.Exit(answerProbe())
	}
	fmt.Fprintf(os.Stderr, "%s is the sandbox launcher of toolfleet's executor (launch protocol %s), run by it, not by hand.\n"+
		"Install it beside the executor, or name it in %s.\n", LauncherName, launchProtocol, LauncherEnv)
	os.Exit(2)
}

// runRole runs the part args give this process, if any (ok): the guard or the
// launcher, and returns its exit code.
func runRole(args []string) (code int, ok bool) {
	switch {
	case len(args) == 1 && args[0] == guardArg0:
		return runGuard(os.Stdin), true
	case len(args) >= 3 && args[0] == launcherArg0:
		err := launch(args[1], args[2], args[2:])
		fmt.Fprintf(os.Stderr, "toolfleet sandbox: %v\n", err)
		return ExitSetup, true
	}
	return 0, false
}

// answerProbe is the launcher program run confined as its own probe's program: it
// checks that it is confined (no_new_privs, a seccomp filter, Landlock: / cannot be
// listed) and answers with the protocol it speaks.
func answerProbe() int {
	var wrong []string
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		wrong = append(wrong, err.Error())
	}
	lines := strings.Split(string(status), "\n")
	for _, want := range []string{"NoNewPrivs: 1", "Seccomp: 2"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Join(strings.Fields(l), " ") == want }) {
			wrong = append(wrong, "no "+want)
		}
	}
	if f, err := os.Open("/"); err == nil {
		f.Close()
		wrong = append(wrong, "Landlock let it open /")
	} else if !errors.Is(err, fs.ErrPermission) {
		wrong = append(wrong, err.Error())
	}
	if len(wrong) > 0 {
		fmt.Fprintf(os.Stderr, "toolfleet sandbox: the probe is not confined: %s\n", strings.Join(wrong, "; "))
		return ExitSetup
	}
	fmt.Print(probeAnswer())
	return 0
}

// launch confines this process to the policy and replaces it with prog; it returns only
// on failure. In order: Landlock (on every thread); then, on this thread, which execs
// the program: the bounding set emptied, the user switched (runAs), every other
// capability dropped, the parent-death signal, no_new_privs, the seccomp filter.
func launch(spec, prog string, argv []string) error {
	// Strict: a field this launcher does not know is a policy it cannot hold.
	var s launchSpec
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if s.Protocol != launchProtocol {
		return fmt.Errorf("the launch protocol is %q, this launcher speaks %q: install the launcher of the executor's build", s.Protocol, launchProtocol)
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
