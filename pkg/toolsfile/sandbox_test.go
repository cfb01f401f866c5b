package toolsfile

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The sandbox option on a command tool with a schema: it writes under its write path,
// not elsewhere, and cannot connect (network is false by default).
func TestSandboxOption(t *testing.T) {
	if abi, err := sandbox.ABI(); abi < 4 {
		t.Skipf("Landlock ABI %d (%v): the sandbox needs ABI 4", abi, err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dir, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "scratch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "save.sh"), []byte(`#!/bin/bash
to=$(sed -n 's/.*"to":"\([^"]*\)".*/\1/p')
{ echo saved > "$to"; } 2>/dev/null && echo wrote || echo write-refused
{ exec 3<>/dev/tcp/127.0.0.1/`+port+`; } 2>/dev/null && echo connected || echo connect-refused
`), 0o755); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, dir, "tools.yaml", `
tools:
  - name: save
    parameters: {type: object, properties: {to: {type: string}}, required: [to]}
    command:
      argv: [./save.sh]
      passEnv: [PATH]
      sandbox: {write: [scratch]}
`)
	specs, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := specs[0].Command.Sandbox.Write; len(got) != 1 || got[0] != filepath.Join(dir, "scratch") {
		t.Fatalf("write paths %v, want the scratch directory resolved against the tools file's", got)
	}
	reg := tools.NewRegistry()
	if err := Register(reg, specs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ to, want string }{
		{filepath.Join(dir, "scratch", "out.txt"), "wrote\nconnect-refused"},
		{filepath.Join(elsewhere, "out.txt"), "write-refused\nconnect-refused"},
	} {
		c, err := reg.Hydrate("save", []byte(`{"to":"`+tt.to+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		o := c.Run(context.Background())
		if o.Err != nil || string(o.Output) != `"`+strings.ReplaceAll(tt.want, "\n", `\n`)+`"` {
			t.Errorf("save to %s: %s %v, want %q", tt.to, o.Output, o.Err, tt.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "scratch", "out.txt")); err != nil || string(b) != "saved\n" {
		t.Errorf("scratch/out.txt: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the tool wrote outside its write path (stat: %v)", err)
	}
}

// A kernel without Landlock, or with too low an ABI for what is asked, refuses to
// serve the confined tools, saying why; nothing is registered, nothing runs unconfined.
func TestKernelWithoutLandlockRefusesConfinedTools(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "ok.sh", "echo ok")
	p := writeFile(t, dir, "tools.yaml", `
tools:
  - {name: peek, safe: true, allowNoSchema: true, noSchemaMode: read-only, capabilities: [read-only], command: {argv: [./ok.sh]}}
  - {name: fetch, parameters: {type: object}, command: {argv: [./ok.sh], sandbox: {network: true}}}
  - {name: plain, parameters: {type: object}, command: {argv: [./ok.sh]}}
`)
	tests := []struct {
		abi  int
		want []string // what the refusal says; none: every tool is served
	}{
		{0, []string{`tool "peek" cannot be served: it declares itself read-only`, "no Landlock", `tool "fetch" cannot be served: its sandbox option`}},
		{3, []string{`tool "peek"`, "the kernel's Landlock ABI is 3, and denying TCP connect and bind needs ABI 4"}},
		{4, nil},
	}
	real := landlockABI
	t.Cleanup(func() { landlockABI = real })
	for _, tt := range tests {
		landlockABI = func() (int, error) { return tt.abi, nil }
		specs, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		reg := tools.NewRegistry()
		err = Register(reg, specs)
		if tt.want == nil {
			if err != nil {
				t.Errorf("ABI %d: %v", tt.abi, err)
			}
			continue
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("ABI %d: Register error %v\nwant it to say %q", tt.abi, err, w)
			}
		}
		if !errors.Is(err, sandbox.ErrUnsupported) || reg.Len() != 0 {
			t.Errorf("ABI %d: err %v, %d tools registered; want ErrUnsupported and none", tt.abi, err, reg.Len())
		}
		if tt.abi == 3 && strings.Contains(err.Error(), `"fetch"`) {
			t.Errorf("ABI 3 refused fetch, whose sandbox allows the network (ABI 3 is enough): %v", err)
		}
	}
}
