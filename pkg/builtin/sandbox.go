package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Default limits of the file tools, used when the Config leaves them zero.
const (
	DefaultMaxReadBytes   = 1 << 20 // read_file returns at most this much, flagged truncated
	DefaultMaxWriteBytes  = 1 << 20 // write_file refuses more
	DefaultMaxListEntries = 1000    // list_dir returns at most this many, flagged truncated
)

// sandbox is the directory the file tools are confined to, and their limits. Every call
// opens it as an [os.Root], so the kernel-level checks of os.Root (no "..", no absolute
// path, no symbolic link leading out) apply to every path a model sends, and a sandbox
// directory replaced while the executor runs is picked up.
type sandbox struct {
	dir        string
	maxRead    int64
	maxWrite   int64
	maxEntries int
}

func (s *sandbox) open(tool string) (*os.Root, error) {
	if s == nil || s.dir == "" {
		return nil, notConfigured(tool)
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		// The executor's fault, not the call's: tell the operator, let the fleet retry.
		return nil, tools.Wrap(tools.CodeToolFailed, err, tool+": the sandbox directory cannot be opened")
	}
	return root, nil
}

// openPath opens the sandbox for tool and checks path, a path a model sent: it returns
// the root, which the caller closes, and the path cleaned, relative to the root.
func (s *sandbox) openPath(tool, path string) (*os.Root, string, error) {
	root, err := s.open(tool)
	if err != nil {
		return nil, "", err
	}
	p, perr := sandboxPath(path)
	if perr != nil {
		root.Close()
		return nil, "", perr
	}
	return root, p, nil
}

// openEntry opens path, a path a model sent, in the sandbox for tool and stats it: it
// returns the file, which the caller closes, its information and its cleaned path.
func (s *sandbox) openEntry(tool, path string) (*os.File, fs.FileInfo, string, error) {
	root, p, err := s.openPath(tool, path)
	if err != nil {
		return nil, nil, "", err
	}
	defer root.Close() // what it opened stays open
	f, err := root.Open(p)
	if err != nil {
		return nil, nil, "", fileError(tool, path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, "", fileError(tool, path, err)
	}
	return f, st, p, nil
}

func (s *sandbox) readLimit() int64 {
	if s.maxRead > 0 {
		return s.maxRead
	}
	return DefaultMaxReadBytes
}

func (s *sandbox) writeLimit() int64 {
	if s.maxWrite > 0 {
		return s.maxWrite
	}
	return DefaultMaxWriteBytes
}

func (s *sandbox) entryLimit() int {
	if s.maxEntries > 0 {
		return s.maxEntries
	}
	return DefaultMaxListEntries
}

// sandboxPath checks a path a model sent and returns it cleaned, relative to the sandbox
// root ("." for the root itself). os.Root would refuse the same paths; checking first
// gives the model a message it can act on.
func sandboxPath(p string) (string, *tools.Error) {
	if strings.ContainsRune(p, 0) {
		return "", invalidArg("/path", "path contains a NUL byte")
	}
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", invalidArg("/path", fmt.Sprintf("path %q is absolute; paths are relative to the sandbox root", p))
	}
	clean := filepath.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", invalidArg("/path", fmt.Sprintf("path %q leads outside the sandbox", p))
	}
	return clean, nil
}

// fileError explains a failed file operation on path in words a model can act on. Every
// case is permanent: the same call would fail the same way.
func fileError(tool, path string, err error) *tools.Error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return permanent("%s: %q does not exist in the sandbox", tool, path)
	case errors.Is(err, fs.ErrPermission):
		return permanent("%s: permission denied on %q", tool, path)
	case escapesRoot(err):
		return permanent("%s: %q leads outside the sandbox (through a symbolic link)", tool, path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return tools.Wrap(tools.CodeToolFailedPermanent, err, fmt.Sprintf("%s: %q: %v", tool, path, pe.Err))
	}
	return tools.Wrap(tools.CodeToolFailedPermanent, err, fmt.Sprintf("%s: %q: %v", tool, path, err))
}

// escapesRoot recognises os.Root's refusal of a path leading out of the root. The standard
// library keeps that error unexported, so its text is the only handle.
func escapesRoot(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

// fileTool is the definition of a file tool of the sandbox: safe when it only reads.
func fileTool(name, description string, parameters []byte, safe bool) tools.Definition {
	return tools.Definition{Type: "function", Name: name, Description: description, Parameters: parameters,
		Safe: safe, Tags: []string{"files"}}
}
