package builtin

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/write_file.json
var writeFileSchema []byte

// WriteFile is the tool write_file: it replaces a file in the sandbox with new content.
// It is unsafe (calls wait for an approval) and idempotent: the file is replaced whole and
// atomically (a temporary file renamed over it), so running a call twice leaves the
// sandbox as running it once, and a crash mid-write never leaves half a file.
type WriteFile struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	Encoding   string `json:"encoding,omitempty"` // "text" (default) or "base64"
	CreateDirs bool   `json:"create_dirs,omitempty"`

	sb *sandbox // set by Register; nil refuses every call
}

// WriteResult is the output of [WriteFile].
type WriteResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"` // bytes written
}

// Definition describes write_file.
func (WriteFile) Definition() tools.Definition {
	return fileTool("write_file", "Create or replace a file in the sandbox directory with the given content.", writeFileSchema, false)
}

// Run writes the file.
func (w *WriteFile) Run(ctx context.Context) (any, error) {
	root, p, err := w.sb.openPath("write_file", w.Path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if p == "." {
		return nil, invalidArg("/path", "path names the sandbox root, not a file")
	}
	data := []byte(w.Content)
	switch w.Encoding {
	case "", EncodingText:
	case EncodingBase64:
		if data, err = base64.StdEncoding.DecodeString(w.Content); err != nil {
			return nil, invalidArg("/content", fmt.Sprintf("content is not base64: %v", err))
		}
	default:
		return nil, invalidArg("/encoding", fmt.Sprintf("unknown encoding %q; use \"text\" or \"base64\"", w.Encoding))
	}
	if limit := w.sb.writeLimit(); int64(len(data)) > limit {
		return nil, invalidArg("/content", fmt.Sprintf("content is %d bytes; the limit is %d", len(data), limit))
	}
	dir := filepath.Dir(p)
	if w.CreateDirs && dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return nil, fileError("write_file", filepath.ToSlash(dir), err)
		}
	}
	if st, err := root.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, permanent("write_file: directory %q does not exist; set create_dirs to create it", filepath.ToSlash(dir))
		}
		return nil, fileError("write_file", filepath.ToSlash(dir), err)
	} else if !st.IsDir() {
		return nil, permanent("write_file: %q is not a directory", filepath.ToSlash(dir))
	}
	if st, err := root.Lstat(p); err == nil && st.IsDir() {
		return nil, permanent("write_file: %q is a directory", w.Path)
	} else if err == nil && st.Mode()&fs.ModeSymlink != 0 {
		// Replacing the link would surprise whoever made it; writing through it could
		// leave the sandbox. Neither happens.
		return nil, permanent("write_file: %q is a symbolic link; only regular files are written", w.Path)
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx, "write_file")
	}
	if err := writeAtomically(root, p, data); err != nil {
		return nil, fileError("write_file", w.Path, err)
	}
	return WriteResult{Path: p, Bytes: len(data)}, nil
}

// writeAtomically writes data to a temporary file beside p and renames it over p, so a
// reader sees the old content or the new, never a part.
func writeAtomically(root *os.Root, p string, data []byte) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails (since Go 1.24)
	tmp := filepath.Join(filepath.Dir(p), ".write_file-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, p)
	}
	if err != nil {
		_ = root.Remove(tmp) // err says what failed; a temporary file left behind is harmless
		return err
	}
	return nil
}
