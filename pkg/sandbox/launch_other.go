//go:build !linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
)

// ABI returns 0 and an error: Landlock is Linux's.
func ABI() (int, error) { return 0, errors.New("Landlock exists only on Linux") }

// CheckSeccomp returns an error wrapping [ErrUnsupported]: seccomp is Linux's.
func CheckSeccomp() error {
	return fmt.Errorf("%w: seccomp exists only on Linux", ErrUnsupported)
}

// Guard returns an error wrapping [ErrUnsupported]: the guard is Linux's.
func Guard(pgid int) (release func(), err error) {
	return nil, fmt.Errorf("%w: the process guard exists only on Linux", ErrUnsupported)
}

// Init marks the program as initialized; there is no launcher outside Linux, and
// [Command] fails with [ErrUnsupported] for want of Landlock.
func Init() { initialized.Store(true) }

// Main is the launcher program's: outside Linux there is nothing to launch.
func Main() {
	fmt.Fprintln(os.Stderr, "toolfleet sandbox: the sandbox exists only on Linux")
	os.Exit(ExitSetup)
}
