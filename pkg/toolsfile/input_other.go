//go:build !linux

package toolsfile

import "os"

// sealedFile returns a file that holds data, whole, at offset 0, for a process to
// inherit, and the function that closes it. Outside Linux it is a temporary file (mode
// 0600), removed from its directory at once where the system allows it (Unix), when
// closed otherwise.
func sealedFile(name string, data []byte) (*os.File, func(), error) {
	f, err := os.CreateTemp("", "toolfleet-"+name+"-*")
	if err != nil {
		return nil, nil, err
	}
	path := f.Name()
	done := func() {
		f.Close()
		_ = os.Remove(path) // gone already where the early removal worked
	}
	if os.Remove(path) == nil {
		done = func() { f.Close() }
	}
	if _, err := f.Write(data); err != nil {
		done()
		return nil, nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		done()
		return nil, nil, err
	}
	return f, done, nil
}
