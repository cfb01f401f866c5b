package builtin

import (
	"context"
	_ "embed"
	"io/fs"
	"slices"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/list_dir.json
var listDirSchema []byte

// ListDir is the tool list_dir: the entries of a directory in the sandbox, sorted by
// name. Safe and idempotent. At most the entry limit is returned, flagged truncated.
type ListDir struct {
	Path string `json:"path,omitempty"`

	sb *sandbox // set by Register; nil refuses every call
}

// DirEntry is one entry of a [ListResult].
type DirEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`           // "file", "dir", "symlink" or "other"
	Size int64  `json:"size,omitempty"` // for files
}

// ListResult is the output of [ListDir].
type ListResult struct {
	Path      string     `json:"path"`
	Entries   []DirEntry `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// Definition describes list_dir.
func (ListDir) Definition() tools.Definition {
	return fileTool("list_dir", "List the files and directories in a directory of the sandbox.", listDirSchema, true)
}

// Run lists the directory.
func (l *ListDir) Run(ctx context.Context) (any, error) {
	f, st, p, err := l.sb.openEntry("list_dir", l.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !st.IsDir() {
		return nil, permanent("list_dir: %q is a file; read it with read_file", l.Path)
	}
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, fileError("list_dir", l.Path, err)
	}
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	limit := l.sb.entryLimit()
	res := ListResult{Path: p, Entries: make([]DirEntry, 0, min(len(des), limit))}
	if len(des) > limit {
		des, res.Truncated = des[:limit], true
	}
	for _, de := range des {
		e := DirEntry{Name: de.Name(), Type: entryType(de.Type())}
		if e.Type == "file" {
			if info, err := de.Info(); err == nil {
				e.Size = info.Size()
			}
		}
		res.Entries = append(res.Entries, e)
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx, "list_dir")
	}
	return res, nil
}

func entryType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
