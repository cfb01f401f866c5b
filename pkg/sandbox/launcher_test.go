package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/sandboxtest"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// reportLauncherEnv, when set, makes the test binary print the launcher it would start
// sandboxed commands through (sandbox.Launcher) instead of running the tests.
const reportLauncherEnv = "TOOLFLEET_SANDBOX_TEST_REPORT_LAUNCHER"

func reportLauncher() int {
	path, err := sandbox.Launcher()
	fmt.Println(path, err)
	return 0
}

// launcherOf is the program a sandboxed command starts through.
func launcherOf(t *testing.T) string {
	t.Helper()
	cmd, err := sandbox.Command(context.Background(), sandbox.ReadOnly(), "true")
	if err != nil {
		t.Fatal(err)
	}
	return cmd.Path
}

// checkConfined runs a write outside the policy and fails the test unless it is refused.
func checkConfined(t *testing.T) {
	t.Helper()
	victim := filepath.Join(t.TempDir(), "written")
	if out, err := run(t, sandbox.ReadOnly(), t.TempDir(), "echo x > "+victim+" && echo wrote"); err == nil || strings.Contains(out, "wrote") {
		t.Fatalf("write under read-only: %q, %v; want a failure", out, err)
	}
	if _, err := os.Stat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists after a read-only run: %v", victim, err)
	}
}

// The tests' sandboxed commands start through the launcher program TestMain built (it
// passes its probe), and it confines them.
func TestCommandStartsThroughTheLauncherProgram(t *testing.T) {
	needLandlock(t)
	want := os.Getenv(sandbox.LauncherEnv)
	if got, err := sandbox.Launcher(); got != want || err != nil {
		t.Fatalf("Launcher() = %q, %v; want the program TestMain built, %q", got, err, want)
	}
	if got := launcherOf(t); got != want {
		t.Fatalf("a sandboxed command starts through %q, want %q", got, want)
	}
	checkConfined(t)
}

// A launcher program installed beside the running binary is used without being named,
// as in the image (/usr/local/bin/).
func TestLauncherBesideTheRunningBinary(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "executor")
	copyFile(t, os.Getenv(sandbox.LauncherEnv), filepath.Join(dir, sandbox.LauncherName))
	copyFile(t, self, exe)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), sandbox.LauncherEnv+"=", reportLauncherEnv+"=1")
	out, err := cmd.CombinedOutput()
	if want := filepath.Join(dir, sandbox.LauncherName) + " <nil>\n"; err != nil || string(out) != want {
		t.Fatalf("a binary with the launcher beside it reports %q, %v; want %q", out, err, want)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// Where no launcher program is installed, or the one named is missing, broken, runs
// programs unconfined or speaks another launch protocol, sandboxed commands start
// through the running binary (the one named is reported, saying why), and are as
// confined.
func TestLauncherFallsBackToTheRunningBinary(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	other, err := sandboxtest.Build(t.TempDir(), "-ldflags=-X=github.com/toolfleet/toolfleet/pkg/sandbox.launchProtocol=0")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, launcher, why string
	}{
		{"none installed", "", ""},
		{"missing", filepath.Join(dir, "missing"), "no such file"},
		{"not a program", write("garbage", "not a program\n"), "exec format error"},
		// Runs the program it is given, unconfined; its probe answers nothing.
		{"unconfined", write("unconfined", "#!/bin/sh\nshift\nexec \"$@\"\n"), `its probe answered ""`},
		{"another protocol", other, `the launch protocol is "1", this launcher speaks "0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(sandbox.LauncherEnv, tt.launcher)
			path, err := sandbox.Launcher()
			t.Logf("Launcher() = %q, %v", path, err)
			if path != sandbox.SelfLauncher {
				t.Errorf("Launcher() = %q, want %s", path, sandbox.SelfLauncher)
			}
			switch {
			case tt.why == "" && err != nil:
				t.Errorf("Launcher() with none installed: %v", err)
			case tt.why != "" && (err == nil || !strings.Contains(err.Error(), tt.launcher+" ") || !strings.Contains(err.Error(), tt.why)):
				t.Errorf("Launcher() says %v, want it to name %s and say %q", err, tt.launcher, tt.why)
			}
			if got := launcherOf(t); got != sandbox.SelfLauncher {
				t.Errorf("a sandboxed command starts through %q, want %s", got, sandbox.SelfLauncher)
			}
			checkConfined(t)
		})
	}
}
