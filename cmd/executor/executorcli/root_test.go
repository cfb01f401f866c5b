package executorcli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
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
