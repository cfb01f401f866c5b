package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// runAs in a tools file: a root executor runs the command as that user and group, with
// no supplementary group, sandboxed or not; uid or gid 0 is refused when the file is
// loaded, and an executor that is not root refuses to serve the tool.
func TestRunAsInAToolsFile(t *testing.T) {
	dir := openDir(t)
	p := writeFile(t, dir, "tools.yaml", `
tools:
  - name: who
    parameters: {type: object}
    command: {argv: [/bin/sh, -c, "id -u; id -g; id -G"], runAs: {uid: 65534, gid: 65534}}
  - name: who_confined
    parameters: {type: object}
    command: {argv: [/bin/sh, -c, "id -u; id -g; id -G"], runAs: {uid: 65534, gid: 65534}, sandbox: {}}
`)
	specs, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if geteuid() == 0 {
		if !abiAtLeast(4) {
			specs = specs[:1]
		}
		reg := tools.NewRegistry()
		if err := Register(reg, specs); err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			out, err := s.Run(context.Background(), json.RawMessage(`{}`))
			if err != nil {
				t.Fatalf("%s: %v", s.Definition.Name, err)
			}
			if got, _ := json.Marshal(out); string(got) != `"65534\n65534\n65534"` {
				t.Errorf("%s runs as %s, want uid, gid and groups 65534 alone", s.Definition.Name, got)
			}
		}
	}

	real := geteuid
	t.Cleanup(func() { geteuid = real })
	geteuid = func() int { return 1000 }
	specs, err = Load(p)
	if err != nil {
		t.Fatal(err)
	}
	err = Register(tools.NewRegistry(), specs)
	if !errors.Is(err, ErrNotRoot) || !strings.Contains(err.Error(), `tool "who" cannot be served`) || !strings.Contains(err.Error(), "uid 1000") {
		t.Errorf("Register by an executor running as uid 1000: %v, want ErrNotRoot naming the tool", err)
	}

	bad := writeFile(t, dir, "bad.yaml", `
tools:
  - name: as_root
    parameters: {type: object}
    command: {argv: [/bin/true], runAs: {uid: 0, gid: 65534}}
`)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "runAs {uid: 0, gid: 65534}: give an unprivileged user and group") {
		t.Errorf("Load of runAs uid 0: %v", err)
	}
}
