//go:build linux

package toolsfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// sealedFile returns a file that holds data, whole, at offset 0, for a process to
// inherit: a memfd, which exists in no directory (nothing to list, nothing left after a
// crash) and is sealed, so that what it holds cannot change; and the function that
// closes it. It is close-on-exec: only a command given it (stdin, ExtraFiles) gets it.
func sealedFile(name string, data []byte) (*os.File, func(), error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	done := func() { f.Close() }
	if _, err := f.Write(data); err != nil {
		done()
		return nil, nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		done()
		return nil, nil, fmt.Errorf("seal %s: %w", name, err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		done()
		return nil, nil, err
	}
	return f, done, nil
}
