package allinone

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The command itself, built and run as a user runs it: `toolfleet demo` exits 0 with its
// summary; a demo that cannot run exits non-zero and says why.
func TestDemoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cmd/toolfleet")
	}
	bin := filepath.Join(t.TempDir(), "toolfleet")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/toolfleet").CombinedOutput(); err != nil {
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
		{"unknown subcommand", []string{"nonsense"}, "", 2, "usage:"},
		{"bad flag", []string{"demo", "-calls", "many"}, "", 2, "invalid value"},
		{"bad model", []string{"demo", "-calls", "10"}, "TOOLFLEET_MODEL=bogus", 1, "want <provider>/<model>"},
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
}
