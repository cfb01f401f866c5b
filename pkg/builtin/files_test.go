package builtin

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// fileBundle is a sandbox with a few files and, beside it, a secret the tools must never
// reach.
type fileBundle struct {
	dir    string // the sandbox root
	secret string // a file outside the sandbox
	sb     *sandbox
}

func setupFiles(t *testing.T) fileBundle {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "sandbox")
	secret := filepath.Join(base, "secret.txt")
	mustWrite(t, secret, "top secret")
	mustWrite(t, filepath.Join(dir, "hello.txt"), "hello, world\n")
	mustWrite(t, filepath.Join(dir, "notes", "a.md"), "# a")
	mustWrite(t, filepath.Join(dir, "notes", "b.md"), "# b")
	mustWrite(t, filepath.Join(dir, "binary.bin"), "\x00\xff\xfe")
	mustSymlink(t, secret, filepath.Join(dir, "absolute-escape"))
	mustSymlink(t, "../secret.txt", filepath.Join(dir, "relative-escape"))
	mustSymlink(t, "..", filepath.Join(dir, "notes", "up")) // the sandbox root itself: allowed
	mustSymlink(t, "../..", filepath.Join(dir, "notes", "out"))
	mustSymlink(t, "hello.txt", filepath.Join(dir, "inside-link"))
	return fileBundle{dir: dir, secret: secret, sb: &sandbox{dir: dir}}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code tools.Code, fragment string) {
	t.Helper()
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	if !strings.Contains(te.Message, fragment) {
		t.Fatalf("error message %q does not mention %q", te.Message, fragment)
	}
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	ctx := context.Background()

	out, err := (&ReadFile{Path: "hello.txt", sb: b.sb}).Run(ctx)
	if err != nil {
		t.Fatalf("read hello.txt: %v", err)
	}
	if got, want := out.(ReadResult), (ReadResult{Path: "hello.txt", Size: 13, Content: "hello, world\n", Encoding: "text"}); got != want {
		t.Fatalf("read hello.txt = %+v, want %+v", got, want)
	}

	out, err = (&ReadFile{Path: "./notes/../inside-link", sb: b.sb}).Run(ctx)
	if err != nil || out.(ReadResult).Content != "hello, world\n" {
		t.Fatalf("read through a link inside the sandbox = %+v, %v", out, err)
	}

	out, err = (&ReadFile{Path: "binary.bin", sb: b.sb}).Run(ctx)
	if err != nil {
		t.Fatalf("read binary.bin: %v", err)
	}
	got := out.(ReadResult)
	raw, _ := base64.StdEncoding.DecodeString(got.Content)
	if got.Encoding != "base64" || string(raw) != "\x00\xff\xfe" {
		t.Fatalf("read binary.bin = %+v, want its bytes in base64", got)
	}
}

func TestReadFileTruncatesAtTheLimit(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	// "é" is two bytes; a limit of 6 cuts "abcdé" + "é" inside the second é.
	mustWrite(t, filepath.Join(b.dir, "long.txt"), "abcdééé")
	sb := &sandbox{dir: b.dir, maxRead: 6}
	out, err := (&ReadFile{Path: "long.txt", sb: sb}).Run(context.Background())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if got, want := out.(ReadResult), (ReadResult{Path: "long.txt", Size: 10, Content: "abcdé", Encoding: "text", Truncated: true}); got != want {
		t.Fatalf("read = %+v, want %+v", got, want)
	}
}

func TestFileToolsStayInTheSandbox(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	ctx := context.Background()
	escapes := []struct {
		name, path string
		code       tools.Code
		fragment   string
	}{
		{"parent", "../secret.txt", tools.CodeInvalidInput, "leads outside the sandbox"},
		{"parent after a detour", "notes/../../secret.txt", tools.CodeInvalidInput, "leads outside the sandbox"},
		{"absolute", b.secret, tools.CodeInvalidInput, "is absolute"},
		{"absolute root", "/etc/passwd", tools.CodeInvalidInput, "is absolute"},
		{"NUL byte", "hello.txt\x00", tools.CodeInvalidInput, "NUL"},
		{"symlink to an absolute path", "absolute-escape", tools.CodeToolFailedPermanent, "leads outside the sandbox"},
		{"symlink to a relative path", "relative-escape", tools.CodeToolFailedPermanent, "leads outside the sandbox"},
		{"symlinked directory", "notes/out/secret.txt", tools.CodeToolFailedPermanent, "leads outside the sandbox"},
	}
	for _, tt := range escapes {
		t.Run("read "+tt.name, func(t *testing.T) {
			out, err := (&ReadFile{Path: tt.path, sb: b.sb}).Run(ctx)
			if err == nil {
				t.Fatalf("read %q = %+v, want a refusal", tt.path, out)
			}
			wantCode(t, err, tt.code, tt.fragment)
		})
		t.Run("write "+tt.name, func(t *testing.T) {
			_, err := (&WriteFile{Path: tt.path, Content: "pwned", sb: b.sb}).Run(ctx)
			if err == nil {
				t.Fatalf("write %q succeeded, want a refusal", tt.path)
			}
		})
	}
	t.Run("list the parent", func(t *testing.T) {
		_, err := (&ListDir{Path: "..", sb: b.sb}).Run(ctx)
		wantCode(t, err, tools.CodeInvalidInput, "leads outside the sandbox")
	})
	t.Run("list through a symlink", func(t *testing.T) {
		_, err := (&ListDir{Path: "notes/out", sb: b.sb}).Run(ctx)
		wantCode(t, err, tools.CodeToolFailedPermanent, "leads outside the sandbox")
	})
	if got, err := os.ReadFile(b.secret); err != nil || string(got) != "top secret" {
		t.Fatalf("the secret outside the sandbox changed: %q, %v", got, err)
	}
}

func TestReadFileFailures(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	ctx := context.Background()
	_, err := (&ReadFile{Path: "missing.txt", sb: b.sb}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailedPermanent, `"missing.txt" does not exist`)
	_, err = (&ReadFile{Path: "notes", sb: b.sb}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailedPermanent, "is a directory")
	_, err = (&ReadFile{Path: "hello.txt"}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailedPermanent, "not configured")
	_, err = (&ReadFile{Path: "hello.txt", sb: &sandbox{dir: filepath.Join(b.dir, "gone")}}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailed, "sandbox directory cannot be opened")
}

func TestListDir(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	ctx := context.Background()
	out, err := (&ListDir{sb: b.sb}).Run(ctx)
	if err != nil {
		t.Fatalf("list root: %v", err)
	}
	got := out.(ListResult)
	want := []DirEntry{
		{Name: "absolute-escape", Type: "symlink"},
		{Name: "binary.bin", Type: "file", Size: 3},
		{Name: "hello.txt", Type: "file", Size: 13},
		{Name: "inside-link", Type: "symlink"},
		{Name: "notes", Type: "dir"},
		{Name: "relative-escape", Type: "symlink"},
	}
	if got.Path != "." || got.Truncated || len(got.Entries) != len(want) {
		t.Fatalf("list root = %+v, want %+v", got, want)
	}
	for i := range want {
		if got.Entries[i] != want[i] {
			t.Fatalf("entry %d = %+v, want %+v", i, got.Entries[i], want[i])
		}
	}

	out, err = (&ListDir{Path: "notes", sb: &sandbox{dir: b.dir, maxEntries: 2}}).Run(ctx)
	if err != nil {
		t.Fatalf("list notes: %v", err)
	}
	got = out.(ListResult)
	if !got.Truncated || len(got.Entries) != 2 || got.Entries[0].Name != "a.md" || got.Entries[1].Name != "b.md" {
		t.Fatalf("list notes with a limit of 2 = %+v, want a.md, b.md and truncated", got)
	}

	_, err = (&ListDir{Path: "hello.txt", sb: b.sb}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailedPermanent, "is a file")
	_, err = (&ListDir{Path: "nowhere", sb: b.sb}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailedPermanent, "does not exist")
	_, err = (&ListDir{}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailedPermanent, "not configured")
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	ctx := context.Background()

	w := &WriteFile{Path: "hello.txt", Content: "replaced", sb: b.sb}
	for i := range 2 { // twice: the second run must leave the same state (idempotent)
		out, err := w.Run(ctx)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got := out.(WriteResult); got != (WriteResult{Path: "hello.txt", Bytes: 8}) {
			t.Fatalf("write %d = %+v", i, got)
		}
		if got, _ := os.ReadFile(filepath.Join(b.dir, "hello.txt")); string(got) != "replaced" {
			t.Fatalf("after write %d the file holds %q", i, got)
		}
	}

	if _, err := (&WriteFile{Path: "deep/er/x.bin", Content: base64.StdEncoding.EncodeToString([]byte{0, 1, 2}),
		Encoding: "base64", CreateDirs: true, sb: b.sb}).Run(ctx); err != nil {
		t.Fatalf("write with create_dirs: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(b.dir, "deep", "er", "x.bin")); !bytes.Equal(got, []byte{0, 1, 2}) {
		t.Fatalf("deep/er/x.bin holds %v", got)
	}

	// A symlink is never written, even one pointing inside the sandbox.
	_, err := (&WriteFile{Path: "inside-link", Content: "new", sb: b.sb}).Run(ctx)
	wantCode(t, err, tools.CodeToolFailedPermanent, "is a symbolic link")
	if got, _ := os.ReadFile(filepath.Join(b.dir, "hello.txt")); string(got) != "replaced" {
		t.Fatalf("the link's target changed to %q", got)
	}

	entries, _ := os.ReadDir(b.dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("a temporary file was left behind: %s", e.Name())
		}
	}
}

func TestWriteFileFailures(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	ctx := context.Background()
	small := &sandbox{dir: b.dir, maxWrite: 4}
	tests := []struct {
		name     string
		w        WriteFile
		code     tools.Code
		fragment string
	}{
		{"missing directory", WriteFile{Path: "new/x.txt", Content: "x", sb: b.sb}, tools.CodeToolFailedPermanent, "set create_dirs"},
		{"parent is a file", WriteFile{Path: "hello.txt/x", Content: "x", sb: b.sb}, tools.CodeToolFailedPermanent, "not a directory"},
		{"target is a directory", WriteFile{Path: "notes", Content: "x", sb: b.sb}, tools.CodeToolFailedPermanent, "is a directory"},
		{"the root", WriteFile{Path: ".", Content: "x", sb: b.sb}, tools.CodeInvalidInput, "sandbox root"},
		{"bad base64", WriteFile{Path: "x", Content: "!!", Encoding: "base64", sb: b.sb}, tools.CodeInvalidInput, "not base64"},
		{"unknown encoding", WriteFile{Path: "x", Content: "x", Encoding: "rot13", sb: b.sb}, tools.CodeInvalidInput, "unknown encoding"},
		{"too large", WriteFile{Path: "x", Content: "12345", sb: small}, tools.CodeInvalidInput, "the limit is 4"},
		{"not configured", WriteFile{Path: "x", Content: "x"}, tools.CodeToolFailedPermanent, "not configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.w.Run(ctx)
			wantCode(t, err, tt.code, tt.fragment)
		})
	}
	if _, err := os.Stat(filepath.Join(b.dir, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused write created x: %v", err)
	}
}

func TestListDirThroughALinkToTheRoot(t *testing.T) {
	t.Parallel()
	b := setupFiles(t)
	out, err := (&ListDir{Path: "notes/up", sb: b.sb}).Run(context.Background())
	if err != nil {
		t.Fatalf("list notes/up (the root): %v", err)
	}
	if got := out.(ListResult); len(got.Entries) != 6 {
		t.Fatalf("list notes/up = %+v, want the root's 6 entries", got)
	}
}
