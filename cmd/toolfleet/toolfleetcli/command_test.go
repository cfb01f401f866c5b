package toolfleetcli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/cmd/planner/plannercli"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

// The command itself, built and run as a user runs it: `toolfleet demo` exits 0 with its
// summary; a command that cannot run exits non-zero and says why; `toolfleet dev` and
// `toolfleet health` work together.
func TestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cmd/toolfleet")
	}
	bin := filepath.Join(t.TempDir(), "toolfleet")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "demo", "-calls", "300")
	cmd.Env = append(os.Environ(), "TOOLFLEET_MODEL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolfleet demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	summary := regexp.MustCompile(`summary: 300 calls in \S+: \d+ calls/s, p50 \S+, p99 \S+, retries \d+, failures 0, lost 0, doubled 0`)
	if !summary.MatchString(stdout.String()) || !strings.Contains(stdout.String(), "demo ok") {
		t.Fatalf("toolfleet demo printed:\n%s", stdout.String())
	}
	// stderr is not a terminal here: progress comes as plain lines, no \r.
	if !strings.Contains(stderr.String(), "100% (300/300)") || strings.Contains(stderr.String(), "\r") {
		t.Errorf("progress on a non-terminal:\n%q", stderr.String())
	}

	for _, tc := range []struct {
		name string
		args []string
		env  string
		code int
		says string
	}{
		{"unknown subcommand", []string{"nonsense"}, "", 2, `unknown command "nonsense"`},
		{"no subcommand", nil, "", 2, "want a command"},
		{"bad dev host", []string{"dev", "-host", ""}, "", 2, "-host (TOOLFLEET_DEV_HOST) is empty"},
		{"bad ops address", []string{"dev", "-ops-addr", "9090"}, "", 2, `-ops-addr \"9090\"`},
		{"bad flag", []string{"demo", "-calls", "many"}, "", 2, `invalid argument "many" for "--calls"`},
		{"bad model: a configuration error", []string{"demo", "-calls", "10"}, "TOOLFLEET_MODEL=bogus", 2, "want <provider>/<model>"},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = os.Environ()
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.code || !strings.Contains(string(out), tc.says) {
			t.Errorf("%s: %v (want exit %d):\n%s", tc.name, err, tc.code, out)
		}
	}
	t.Run("dev and health", func(t *testing.T) { testDevAndHealth(t, bin) })
}

// `toolfleet dev` serves until SIGTERM, and `toolfleet health` beside it exits 0 once
// it is ready, 1 with the reason against a port nothing listens on.
func testDevAndHealth(t *testing.T, bin string) {
	opsAddr := opstest.FreeAddr(t)
	_, natsPort, _ := net.SplitHostPort(opstest.FreeAddr(t))
	dev := exec.Command(bin, "dev", "-host", "127.0.0.1", "-nats-port", natsPort, "-http", ":0", "-data", t.TempDir())
	dev.Env = append(os.Environ(), "TOOLFLEET_MODEL=", "TOOLFLEET_OPS_ADDR="+opsAddr, "TOOLFLEET_LOG_LEVEL=warn")
	var stdout bytes.Buffer
	dev.Stdout = &stdout
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	defer func() {
		if dev.ProcessState == nil {
			_ = dev.Process.Kill()
			<-exited
		}
	}()

	health := func(env ...string) (int, string) {
		cmd := exec.Command(bin, "health")
		cmd.Env = append(os.Environ(), env...)
		return opstest.ExitCode(t, cmd)
	}
	natstest.EventuallyNil(t, 60*time.Second, "toolfleet health to pass against dev", func() error {
		code, out := health("TOOLFLEET_OPS_ADDR=" + opsAddr)
		switch code {
		case 0:
			return nil
		case 1: // not ready yet
			return fmt.Errorf("exit 1: %s", out)
		}
		t.Fatalf("toolfleet health against dev: exit %d: %s\ndev printed:\n%s", code, out, stdout.String())
		return nil
	})
	_, deadPort, _ := net.SplitHostPort(opstest.FreeAddr(t))
	if code, out := health("TOOLFLEET_OPS_ADDR=:" + deadPort); code != 1 || !strings.Contains(out, `health: Get "http://127.0.0.1:`+deadPort+`/readyz"`) {
		t.Errorf("toolfleet health against a dead port: exit %d: %s", code, out)
	}
	if err := dev.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("toolfleet dev exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("toolfleet dev did not stop within 30s of SIGTERM")
	}
}

// dev's -host comes from TOOLFLEET_DEV_HOST by default, and addresses without a host go
// on it; demo stays quiet unless -v.
func TestParseDev(t *testing.T) {
	for _, name := range []string{"TOOLFLEET_OPS_ADDR", "TOOLFLEET_LOG_LEVEL", "TOOLFLEET_API_TOKEN"} {
		t.Setenv(name, "")
	}
	t.Setenv("TOOLFLEET_DEV_HOST", "0.0.0.0")
	c, err := Parse([]string{"dev", "-nats-port", "4333"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "dev" || c.Dev.Host != "0.0.0.0" || c.Dev.HTTPAddr != ":8080" || c.Dev.OpsAddr != ":9090" || c.Dev.Fleet.NATSPort != 4333 {
		t.Errorf("dev %+v", c.Dev)
	}
	if got := onHost(c.Dev.OpsAddr, c.Dev.Host); got != "0.0.0.0:9090" {
		t.Errorf("ops address on -host: %s", got)
	}
	if got := onHost("127.0.0.1:8081", "0.0.0.0"); got != "127.0.0.1:8081" {
		t.Errorf("an address with a host keeps it: %s", got)
	}
	c, err = Parse([]string{"dev", "-host", "127.0.0.1", "-ops-addr", "off"}, io.Discard)
	if err != nil || c.Dev.Host != "127.0.0.1" || c.Dev.OpsAddr != "" {
		t.Errorf("dev -host 127.0.0.1 -ops-addr off: %+v %v", c.Dev, err)
	}
	if _, err := Parse([]string{"demo", "-host", "0.0.0.0"}, io.Discard); err == nil {
		t.Error("demo took -host")
	}
}

// dev takes the planner program's admission flags, with the same defaults, variables and
// checks: -max-starting (TOOLFLEET_MAX_STARTING) and -max-stall (TOOLFLEET_MAX_STALL).
func TestParseDevAdmission(t *testing.T) {
	for _, name := range []string{"TOOLFLEET_OPS_ADDR", "TOOLFLEET_LOG_LEVEL", "TOOLFLEET_API_TOKEN", "TOOLFLEET_MAX_STARTING", "TOOLFLEET_MAX_STALL"} {
		t.Setenv(name, "")
	}
	c, err := Parse([]string{"dev"}, io.Discard)
	if err != nil || c.Dev.Fleet.Admission != (plannercli.Admission{MaxStarting: 256, MaxStall: time.Second}) {
		t.Fatalf("dev's defaults: %+v %v; want the planner's, 256 and 1s", c.Dev.Fleet.Admission, err)
	}
	t.Setenv("TOOLFLEET_MAX_STALL", "250ms")
	c, err = Parse([]string{"dev", "-max-starting", "8"}, io.Discard)
	if err != nil || c.Dev.Fleet.Admission != (plannercli.Admission{MaxStarting: 8, MaxStall: 250 * time.Millisecond}) {
		t.Fatalf("dev -max-starting 8 with TOOLFLEET_MAX_STALL=250ms: %+v %v", c.Dev.Fleet.Admission, err)
	}
	t.Setenv("TOOLFLEET_MAX_STALL", "0s")
	_, err = Parse([]string{"dev", "-max-starting", "0"}, io.Discard)
	for _, says := range []string{"-max-starting (TOOLFLEET_MAX_STARTING): must be at least 1, got 0", "-max-stall (TOOLFLEET_MAX_STALL): must be a positive duration, got 0s"} {
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("dev -max-starting 0 with TOOLFLEET_MAX_STALL=0s: %v; want it to say %q", err, says)
		}
	}
}
