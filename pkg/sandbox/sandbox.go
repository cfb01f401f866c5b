package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
)

// Policy is what a sandboxed program may do beyond starting: the paths it may read, the
// paths it may write (and read), whether it may use the network, and whom it runs as.
// Paths are absolute.
type Policy struct {
	// Read are files or directories (with everything beneath) granted read and execute.
	Read []string `json:"read,omitempty"`
	// Write are files or directories (with everything beneath) granted read and write:
	// create, remove, rename within them, truncate.
	Write []string `json:"write,omitempty"`
	// Network allows IP sockets: TCP and UDP over IPv4 and IPv6. False denies every
	// socket. Unix, netlink, packet and raw sockets are denied either way.
	Network bool `json:"network,omitempty"`
	// RunAs, when set, is the user and group the program runs as, with no supplementary
	// groups: the launcher, started by a root process, switches to them before it execs
	// the program. Not part of a policy's JSON (a tools file sets it on the command).
	RunAs *User `json:"-"`
}

// User is an unprivileged user and group a program runs as.
type User struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

func (u User) String() string { return fmt.Sprintf("uid %d, gid %d", u.UID, u.GID) }

// systemPaths are granted read and execute to every sandboxed program, so that a
// normal program (a shell, a dynamically linked binary, an interpreter) can start.
var systemPaths = []string{"/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/dev"}

// SystemPaths returns the paths granted read and execute to every sandboxed program,
// so that a normal program (a shell, a dynamically linked binary, an interpreter) can
// start: where programs, libraries and configuration live, and /proc and /dev. Those
// that do not exist are skipped. /dev/null may also be written. The slice is a copy.
func SystemPaths() []string { return slices.Clone(systemPaths) }

// ReadOnly is the policy of a tool that may only read: nothing written but /dev/null,
// no change to any file's mode, owner, extended attributes or times, no socket, and
// these paths readable besides [SystemPaths], the program and its working directory.
func ReadOnly(read ...string) Policy { return Policy{Read: read} }

// MinABI is the lowest Landlock ABI that enforces p: 3 (truncation is confined), 4 when
// p denies the network.
func (p Policy) MinABI() int {
	if p.Network {
		return 3
	}
	return 4
}

// Check reports what is wrong with p itself: a path that is not absolute or not clean.
func (p Policy) Check() error {
	var errs []error
	for _, list := range []struct {
		what  string
		paths []string
	}{{"read", p.Read}, {"write", p.Write}} {
		for _, path := range list.paths {
			if !filepath.IsAbs(path) || filepath.Clean(path) != path {
				errs = append(errs, fmt.Errorf("sandbox: %s path %q must be absolute and clean", list.what, path))
			}
		}
	}
	return errors.Join(errs...)
}

// ErrUnsupported is wrapped by the errors that say the kernel cannot enforce a policy.
var ErrUnsupported = errors.New("sandbox: Landlock cannot enforce this on this kernel")

// CheckABI reports whether a kernel of Landlock ABI abi (0: none) enforces p: nil, or
// an error wrapping [ErrUnsupported] that says what is missing.
func (p Policy) CheckABI(abi int) error {
	need := p.MinABI()
	switch {
	case abi >= need:
		return nil
	case abi <= 0:
		return fmt.Errorf("%w: this kernel has no Landlock (Linux ≥ 5.13 with landlock in the lsm= boot list); the sandbox needs ABI %d", ErrUnsupported, need)
	case !p.Network && abi < 4:
		return fmt.Errorf("%w: the kernel's Landlock ABI is %d, and denying TCP connect and bind needs ABI 4 (Linux ≥ 6.7)", ErrUnsupported, abi)
	default:
		return fmt.Errorf("%w: the kernel's Landlock ABI is %d, and confining file access needs ABI %d (Linux ≥ 6.2)", ErrUnsupported, abi, need)
	}
}

// ExitSetup is the launcher's exit code when it could not confine itself or start the
// program: the program did not run. Its stderr says why, prefixed "toolfleet sandbox: ".
const ExitSetup = 125

// launcherArg0 marks the launcher: the binary started with this argv[0] is one.
const launcherArg0 = "toolfleet-sandbox-launcher"

// initialized is set by Init: only then may Command re-execute the binary.
var initialized atomic.Bool

// ErrNoInit is returned by [Command] in a program that did not call [Init].
var ErrNoInit = errors.New("sandbox: Init was not called at the start of main (or TestMain), so this binary cannot act as the sandbox launcher")

// Initialized reports whether [Init] was called.
func Initialized() bool { return initialized.Load() }

// launchProtocol is the version of what [Command] and the launcher agree on: the
// launcher's argv (its marker, the spec, the program and its argv), the spec's JSON,
// and the guard's argv and lifeline. Change it with any of them: a launcher program of
// another version refuses the spec, fails its probe, and is not used. A variable, not a
// constant, so that a test can build a launcher speaking another version (-ldflags -X).
var launchProtocol = "1"

// launchSpec is what the launcher is told besides the program and its arguments.
type launchSpec struct {
	Protocol string `json:"protocol"`
	Policy   Policy `json:"policy"`
	RunAs    *User  `json:"runAs,omitempty"`
}

// Command returns the command that runs name with args under p, through the launcher
// ([Launcher] says which program that is): set its Dir, Env, standard streams,
// ExtraFiles and SysProcAttr as for any command (but not SysProcAttr.Credential: p.RunAs
// says whom the program runs as); Args[0] and Path are the launcher's. name is looked up
// in PATH (of this process) unless it holds a slash. It fails where [Init] was not
// called, the kernel cannot enforce p (Landlock, seccomp), or name is not found.
func Command(ctx context.Context, p Policy, name string, args ...string) (*exec.Cmd, error) {
	if !initialized.Load() {
		return nil, ErrNoInit
	}
	if err := checkKernel(p); err != nil {
		return nil, err
	}
	prog, err := exec.LookPath(name)
	if err != nil {
		return nil, err
	}
	if prog, err = filepath.Abs(prog); err != nil {
		return nil, err
	}
	launcher, _ := Launcher() // one that failed its probe was reported at start, if asked
	return launchCommand(ctx, launcher, p, prog, args)
}

// checkKernel reports why p cannot be enforced here: a bad path, Landlock or seccomp
// short of what it needs.
func checkKernel(p Policy) error {
	if err := p.Check(); err != nil {
		return err
	}
	abi, _ := ABI()
	if err := p.CheckABI(abi); err != nil {
		return err
	}
	return CheckSeccomp()
}

// launchCommand is the command that has launcher run prog (an absolute path) with args
// under p.
func launchCommand(ctx context.Context, launcher string, p Policy, prog string, args []string) (*exec.Cmd, error) {
	spec, err := json.Marshal(launchSpec{Protocol: launchProtocol, Policy: p, RunAs: p.RunAs})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, launcher, append([]string{string(spec), prog}, args...)...)
	cmd.Args[0] = launcherArg0
	return cmd, nil
}
