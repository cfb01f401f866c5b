package allinone

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner"
)

// The demo's run takes the scripted path and its load loses and doubles nothing.
func TestDemo(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	var out, progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Demo(ctx, DemoOptions{Calls: 500, Out: &out, Progress: &progress}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"scripted model — no LLM",
		"approval requested for write_file",
		"the demo approves it automatically",
		"calculator  {\"expr\"",       // the invalid call
		"invalid",                     // answered invalid
		"calculator  {\"expression\"", // and repaired
		"termination: completed",
		"summary: 500 calls",
		"lost 0, doubled 0",
		"demo ok",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(progress.String(), "100% (500/500)") {
		t.Errorf("progress lacks the last line:\n%s", progress.String())
	}
}

// dev serves the planner API on the fleet until its context ends.
func TestDev(t *testing.T) {
	t.Setenv("TOOLFLEET_MODEL", "")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Dev(ctx, DevOptions{HTTPAddr: "127.0.0.1:0", Fleet: Options{NATSPort: -1}, Out: &bytes.Buffer{},
			Ready: func(api, _ string) { ready <- api }})
	}()
	var api string
	select {
	case api = <-ready:
	case err := <-done:
		t.Fatalf("dev stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev not ready after 30s")
	}
	body := `{"input":"orders","model":"scripted/demo","tools":["get_time","list_dir","calculator","write_file","read_file"],"wait":true,"waitTimeout":"2s"}`
	resp, err := http.Post(api+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var v planner.RunView
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Nobody approves write_file here: the run waits, visible through the API.
	if v.Status != planner.StatusRunning || len(v.Calls) < 4 {
		t.Fatalf("run = %+v", v)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev returned %v after its context ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop within 30s")
	}
}

// The command itself, built and run as a user runs it: `toolfleet demo` exits 0 with its
// summary.
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
	if !strings.Contains(stdout.String(), "summary: 300 calls") || !strings.Contains(stdout.String(), "demo ok") {
		t.Fatalf("toolfleet demo printed:\n%s", stdout.String())
	}
	if out, err := exec.Command(bin, "nonsense").CombinedOutput(); err == nil || !strings.Contains(string(out), "usage:") {
		t.Fatalf("an unknown subcommand gave %v:\n%s", err, out)
	}
}
