//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Capabilities are per thread: these act on the calling thread, which the launcher
// keeps locked until it execs.

// capabilities returns the calling thread's effective, permitted and inheritable sets.
func capabilities() (eff, perm, inh uint64, err error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, 0, 0, fmt.Errorf("capget: %w", err)
	}
	join := func(lo, hi uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }
	return join(data[0].Effective, data[1].Effective), join(data[0].Permitted, data[1].Permitted),
		join(data[0].Inheritable, data[1].Inheritable), nil
}

// dropBoundingSet empties the bounding set, so that no execve can grant a capability
// again (a root program's file capabilities come from it). It needs CAP_SETPCAP: a
// launcher without it (not root) has nothing in its permitted set to use, and
// no_new_privs keeps execve from granting anything, so it leaves the set alone.
func dropBoundingSet() error {
	eff, _, _, err := capabilities()
	if err != nil {
		return err
	}
	if eff&(1<<unix.CAP_SETPCAP) == 0 {
		return nil
	}
	for c := 0; c < 64; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		switch {
		case errors.Is(err, syscall.EINVAL): // past the kernel's last capability
			return nil
		case err != nil:
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// dropCapabilities empties the ambient, inheritable, permitted and effective sets and
// checks that they are empty.
func dropCapabilities() error {
	// EINVAL: a kernel older than 4.3 has no ambient set to clear.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	eff, perm, inh, err := capabilities()
	if err != nil {
		return err
	}
	if eff|perm|inh != 0 {
		return fmt.Errorf("capabilities left after dropping them all: effective %#x, permitted %#x, inheritable %#x", eff, perm, inh)
	}
	return nil
}
