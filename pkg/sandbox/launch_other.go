//go:build !linux

package sandbox

import "errors"

// selfExe is unused where there is no launcher.
const selfExe = ""

// ABI returns 0 and an error: Landlock is Linux's.
func ABI() (int, error) { return 0, errors.New("Landlock exists only on Linux") }

// Init marks the program as initialized; there is no launcher outside Linux, and
// [Command] fails with [ErrUnsupported] for want of Landlock.
func Init() { initialized.Store(true) }
