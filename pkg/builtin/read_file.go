package builtin

import (
	"context"
	_ "embed"
	"io"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/read_file.json
var readFileSchema []byte

// ReadFile is the tool read_file: the content of a file in the sandbox. Safe and
// idempotent. A file larger than the read limit is returned cut, flagged truncated.
type ReadFile struct {
	Path string `json:"path"`

	sb *sandbox // set by Register; nil refuses every call
}

// ReadResult is the output of [ReadFile].
type ReadResult struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`     // the file's size in bytes
	Content   string `json:"content"`  // the content, or its first bytes when truncated
	Encoding  string `json:"encoding"` // "text" or "base64"
	Truncated bool   `json:"truncated"`
}

// Definition describes read_file.
func (ReadFile) Definition() tools.Definition {
	return fileTool("read_file", "Read a file from the sandbox directory. Text is returned as is, other content as base64.", readFileSchema, true)
}

// Run reads the file.
func (r *ReadFile) Run(ctx context.Context) (any, error) {
	f, st, p, err := r.sb.openEntry("read_file", r.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.IsDir() {
		return nil, permanent("read_file: %q is a directory; list it with list_dir", r.Path)
	}
	// A FIFO or a device could block forever or never end.
	if !st.Mode().IsRegular() {
		return nil, permanent("read_file: %q is not a regular file", r.Path)
	}
	limit := r.sb.readLimit()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fileError("read_file", r.Path, err)
	}
	truncated := int64(len(b)) > limit
	if truncated {
		b = b[:limit]
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxError(ctx, "read_file")
	}
	content, enc := encodeContent(b, truncated)
	return ReadResult{Path: p, Size: st.Size(), Content: content, Encoding: enc, Truncated: truncated}, nil
}
