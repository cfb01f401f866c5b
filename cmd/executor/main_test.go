package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// buildExecutor builds this command into a temporary directory.
func buildExecutor(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "executor")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type process struct {
	cmd  *exec.Cmd
	ops  string
	done chan error
}

func startExecutor(t *testing.T, bin, url, id string) *process {
	t.Helper()
	p := &process{ops: opstest.FreeAddr(t), done: make(chan error, 1)}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), "TOOLFLEET_NATS_URL="+url, "TOOLFLEET_OPS_ADDR="+p.ops,
		"TOOLFLEET_EXECUTOR_ID="+id, "TOOLFLEET_BUILTINS=calculator,sleep,echo", "TOOLFLEET_GRACE_PERIOD=10s",
		"TOOLFLEET_CONCURRENCY=16", "TOOLFLEET_LOG_LEVEL=warn")
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	opstest.WaitReady(t, p.ops)
	return p
}

// health runs `executor health` against the ops address addr and returns its exit code
// and output.
func health(t *testing.T, bin, addr string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "health")
	cmd.Env = append(os.Environ(), "TOOLFLEET_OPS_ADDR="+addr)
	return opstest.ExitCode(t, cmd)
}

// publishCall publishes a call the way any NATS client can: hand-written ce-* headers.
func publishCall(t *testing.T, js jetstream.JetStream, tool, id, args string) {
	t.Helper()
	m := nats.NewMsg("toolfleet.call." + tool)
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", id)
	m.Header.Set("ce-type", "io.toolfleet.tool.call")
	m.Header.Set("ce-source", "/test")
	m.Header.Set("ce-runid", "binrun")
	m.Header.Set("Nats-Msg-Id", id)
	m.Data = []byte(`{"arguments":` + args + `}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// results collects every result of run binrun by call id.
type results struct {
	mu   sync.Mutex
	byID map[string][]events.Result
}

func collectResults(t *testing.T, nc *nats.Conn) *results {
	r := &results{byID: map[string][]events.Result{}}
	sub, err := nc.Subscribe("toolfleet.result.binrun.*", func(m *nats.Msg) {
		_, res, err := events.DecodeResult(events.CoreMsg(m))
		if err != nil {
			t.Errorf("undecodable result: %v", err)
			return
		}
		r.mu.Lock()
		r.byID[res.CallID] = append(r.byID[res.CallID], res)
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

func (r *results) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

func TestExecutorBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the executor binary")
	}
	bin := buildExecutor(t)
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	res := collectResults(t, nc)
	first := startExecutor(t, bin, srv.URL(), "first")

	// A call from a plain client runs, and the probes and metrics answer.
	publishCall(t, js, "calculator", "calc1", `{"expression":"6*7"}`)
	natstest.Eventually(t, waitTimeout, "the calculator's result", func() bool { return res.count() == 1 })
	res.mu.Lock()
	got := res.byID["calc1"]
	res.mu.Unlock()
	if len(got) != 1 || got[0].Status != events.StatusOK || !strings.Contains(string(got[0].Output), "42") || got[0].Executor != "first" {
		t.Fatalf("calculator result = %+v", got)
	}
	opstest.Serves(t, first.ops, "toolfleet_executor_calls_total")
	if _, body := opstest.Get(t, first.ops, "/metrics"); !strings.Contains(body, `tool="calculator"`) {
		t.Fatalf("/metrics does not count the calculator call:\n%.2000s", body)
	}
	if code, out := health(t, bin, first.ops); code != 0 {
		t.Fatalf("executor health against a ready executor: exit %d: %s", code, out)
	}

	// SIGTERM under load: the first process stops taking calls and exits 0; a second one
	// takes the rest. Every call has exactly one result.
	const n = 300
	for i := range n {
		publishCall(t, js, "sleep", fmt.Sprintf("s%d", i), `{"duration":"20ms"}`)
	}
	natstest.Eventually(t, waitTimeout, "the load to start", func() bool { return res.count() > 20 })
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first.done:
		first.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("executor exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("executor did not exit within 30s of SIGTERM")
	}
	if code, out := health(t, bin, first.ops); code != 1 || !strings.Contains(out, "connection refused") {
		t.Errorf("executor health against a stopped executor: exit %d: %s", code, out)
	}
	startExecutor(t, bin, srv.URL(), "second")
	natstest.Eventually(t, waitTimeout, "every call's result", func() bool { return res.count() == n+1 })
	res.mu.Lock()
	defer res.mu.Unlock()
	for id, rs := range res.byID {
		if len(rs) != 1 || rs[0].Status != events.StatusOK {
			t.Errorf("call %s: %d results, first %+v", id, len(rs), rs[0])
		}
	}
}

// waitTimeout bounds the waits for the executor binary (natstest.Eventually).
const waitTimeout = 60 * time.Second
