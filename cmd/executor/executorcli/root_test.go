package executorcli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/sandboxtest"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// An executor running as root warns once, at start, of the command tools that would
// run as root unconfined, naming them and saying what to do; sandboxed tools and tools
// with runAs are not named.
func TestRootExecutorWarnsOfUnconfinedCommandTools(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("runs as uid %d: the warning is a root executor's", os.Geteuid())
	}
	dir := t.TempDir()
	body := `tools:
  - {name: plain, parameters: {type: object}, command: {argv: [/bin/true]}}
  - {name: as_nobody, parameters: {type: object}, command: {argv: [/bin/true], runAs: {uid: 65534, gid: 65534}}}
`
	if abi, _ := sandbox.ABI(); abi >= 4 {
		body += "  - {name: confined, parameters: {type: object}, command: {argv: [/bin/true], sandbox: {}}}\n"
	}
	file := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var log opstest.Log
	c := Config{Builtins: []string{}, ToolsFile: file}
	_, _, servers, err := c.Tools(context.Background(), zerolog.New(&log), nil)
	if err != nil {
		t.Fatal(err)
	}
	servers.Close()
	got := log.Lines(`"level":"warn"`, `"unconfined":["tool plain"]`, "runs as root", "runAs")
	if len(got) != 1 {
		t.Errorf("warnings:\n%s\nwant one naming tool plain alone", log.String())
	}
}

// An executor with sandboxed tools says at start what they start through: the launcher
// program named (or beside it); or, warning and saying why, a re-exec of itself where
// the one named cannot be used.
func TestExecutorSaysWhatSandboxedToolsStartThrough(t *testing.T) {
	if abi, _ := sandbox.ABI(); abi < 4 {
		t.Skipf("Landlock ABI %d: no sandboxed tool can be served", abi)
	}
	launcher, err := sandboxtest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte(`tools:
  - {name: confined, parameters: {type: object}, command: {argv: [/bin/true], sandbox: {}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tt := range []struct {
		named string
		want  []string
	}{
		{launcher, []string{`"level":"info"`, `"launcher":"` + launcher + `"`, `"sandboxed":["confined"]`}},
		{missing, []string{`"level":"warn"`, missing + ` is not used`, "re-exec", sandbox.LauncherName, `"sandboxed":["confined"]`}},
	} {
		t.Setenv(sandbox.LauncherEnv, tt.named)
		var log opstest.Log
		c := Config{Builtins: []string{}, ToolsFile: file}
		_, _, servers, err := c.Tools(context.Background(), zerolog.New(&log), nil)
		if err != nil {
			t.Fatal(err)
		}
		servers.Close()
		if got := log.Lines(tt.want...); len(got) != 1 {
			t.Errorf("%s=%s: the executor logged\n%s\nwant one line with %q", sandbox.LauncherEnv, tt.named, log.String(), tt.want)
		}
	}
}
