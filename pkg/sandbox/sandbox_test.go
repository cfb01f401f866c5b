package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/internal/testsupport/sandboxtest"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// TestMain makes the test binary the fallback launcher (and a probe, a guarded parent
// or a reporter where asked), and has the tests' sandboxed commands start through the
// launcher program, built for them, as a deployed executor's do.
func TestMain(m *testing.M) {
	sandbox.Init()
	if attempts, ok := os.LookupEnv(probeEnv); ok {
		os.Exit(probe(attempts))
	}
	if os.Getenv(guardParentEnv) != "" {
		os.Exit(guardParent())
	}
	if os.Getenv(reportLauncherEnv) != "" {
		os.Exit(reportLauncher())
	}
	cleanup, err := sandboxtest.UseLauncher()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		cleanup()
		os.Exit(code)
	}))
}

// needLandlock skips where the kernel cannot enforce the network part.
func needLandlock(t *testing.T) {
	t.Helper()
	if abi, err := sandbox.ABI(); abi < 4 {
		t.Skipf("Landlock ABI %d (%v): these tests need ABI 4", abi, err)
	}
}

// run runs a shell script under p and returns its combined output and error.
func run(t *testing.T, p sandbox.Policy, dir, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, err := sandbox.Command(ctx, p, "sh", "-c", script)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// The read-only policy: the program starts and reads, but writes and TCP connects fail
// inside it, whatever the file permissions allow.
func TestReadOnlyRefusesWritesAndConnects(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("readable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, sandbox.ReadOnly(), dir, "cat in.txt")
	if err != nil || out != "readable\n" {
		t.Fatalf("cat in the working directory: %q, %v", out, err)
	}
	victim := filepath.Join(t.TempDir(), "written")
	out, err = run(t, sandbox.ReadOnly(), dir, "echo x > "+victim+" || exit 3; echo wrote")
	if err == nil || strings.Contains(out, "wrote") {
		t.Fatalf("write under read-only: %q, %v; want a failure", out, err)
	}
	if _, err := os.Stat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists after a read-only run: %v", victim, err)
	}
	out, err = run(t, sandbox.ReadOnly(), dir, "echo > in.txt")
	if err == nil {
		t.Fatalf("truncating a readable file under read-only: %q, want a failure", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "in.txt")); string(b) != "readable\n" {
		t.Fatalf("in.txt holds %q after a read-only run", b)
	}
	if out, err = run(t, sandbox.ReadOnly(), dir, "echo x > /dev/null && echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("writing /dev/null: %q, %v", out, err)
	}

	host, port, accepted := nettest.Listen(t)
	script := "exec 3<>/dev/tcp/" + host + "/" + port + " && echo connected"
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no bash for /dev/tcp")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, err := sandbox.Command(ctx, sandbox.ReadOnly(), "bash", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(b), "connected") {
		t.Fatalf("TCP connect under read-only: %q, %v; want a failure", b, err)
	}
	if n := accepted(0); n != 0 {
		t.Fatalf("the listener accepted %d connections from a read-only program", n)
	}
	// The same connect unconfined reaches it: the listener works.
	if b, err := execBash(script); err != nil || !strings.Contains(b, "connected") {
		t.Fatalf("unconfined connect: %q, %v", b, err)
	}
}

// A policy with write paths: writes there succeed, elsewhere fail; network false
// refuses connects, true allows them.
func TestWritePathsAndNetwork(t *testing.T) {
	needLandlock(t)
	scratch, other := t.TempDir(), t.TempDir()
	p := sandbox.Policy{Write: []string{scratch}}
	out, err := run(t, p, scratch, "mkdir sub && echo a > sub/a && mv sub/a sub/b && cat sub/b")
	if err != nil || out != "a\n" {
		t.Fatalf("writing under the write path: %q, %v", out, err)
	}
	if out, err = run(t, p, scratch, "echo b > "+other+"/b"); err == nil {
		t.Fatalf("writing outside the write path: %q, want a failure", out)
	}
	if _, err := os.Stat(filepath.Join(other, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s/b exists: %v", other, err)
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no bash for /dev/tcp")
	}
	host, port, accepted := nettest.Listen(t)
	script := "exec 3<>/dev/tcp/" + host + "/" + port + " && echo connected"
	for _, network := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd, err := sandbox.Command(ctx, sandbox.Policy{Write: []string{scratch}, Network: network}, "bash", "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cmd.CombinedOutput()
		cancel()
		if got := err == nil && strings.Contains(string(b), "connected"); got != network {
			t.Errorf("network %v: connect %q, %v", network, b, err)
		}
	}
	if n := accepted(1); n != 1 {
		t.Errorf("the listener accepted %d connections, want 1 (network: true only)", n)
	}
}

func execBash(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, "bash", "-c", script).CombinedOutput()
	return string(b), err
}

// A kernel short of the ABI a policy needs is refused with the reason, never run with
// less confinement.
func TestCheckABI(t *testing.T) {
	tests := []struct {
		p    sandbox.Policy
		abi  int
		want string
	}{
		{sandbox.ReadOnly(), 0, "no Landlock"},
		{sandbox.ReadOnly(), 3, "denying TCP connect and bind needs ABI 4"},
		{sandbox.Policy{Network: true}, 2, "needs ABI 3"},
		{sandbox.ReadOnly(), 4, ""},
		{sandbox.Policy{Network: true}, 3, ""},
	}
	for _, tt := range tests {
		err := tt.p.CheckABI(tt.abi)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v at ABI %d: %v", tt.p, tt.abi, err)
			}
			continue
		}
		if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v at ABI %d: %v, want ErrUnsupported saying %q", tt.p, tt.abi, err, tt.want)
		}
	}
	if err := (sandbox.Policy{Read: []string{"rel/path"}, Write: []string{"/a/../b"}}).Check(); err == nil ||
		!strings.Contains(err.Error(), `read path "rel/path"`) || !strings.Contains(err.Error(), `write path "/a/../b"`) {
		t.Errorf("Check of relative and unclean paths: %v", err)
	}
}
