package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The planner subprocess of TestPlannerKilledMidRun: the test binary run again with
// TOOLFLEET_TEST_PLANNER set. It serves runs with a slow scripted model until killed.
func TestMain(m *testing.M) {
	if url := os.Getenv("TOOLFLEET_TEST_PLANNER"); url != "" {
		os.Exit(plannerProcess(url, os.Getenv("TOOLFLEET_TEST_SCRIPT")))
	}
	// A stop is complete when Run returns: no goroutine of a planner outlives the tests.
	goleak.VerifyTestMain(m)
}

func plannerProcess(url, script string) int {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := provider.LoadScripted(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	p, err := New(ctx, nc, Config{Models: map[string]provider.Model{"main": slowModel{m, 400 * time.Millisecond}},
		Events: restartEventsConfig(), Log: zerolog.New(os.Stderr)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := p.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func restartEventsConfig() events.Config {
	return events.Config{AckWait: tools.Duration(2 * time.Second)}
}

// slowModel thinks for a while, so that a kill lands in the middle of a model call.
type slowModel struct {
	provider.Model
	delay time.Duration
}

func (m slowModel) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	resp, err := m.Generate(ctx, req)
	return streamed(onDelta, resp, err)
}

func (m slowModel) Generate(ctx context.Context, req provider.Request) (*provider.Response, error) {
	select {
	case <-time.After(m.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.Model.Generate(ctx, req)
}

// A planner process killed with SIGKILL in the middle of a run, then started again,
// finishes the run: nothing lost (every step taken, the answer given) and nothing
// repeated (each tool call ran once).
func TestPlannerKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a planner process")
	}
	b := setup(t, nil)
	var mu sync.Mutex
	ran := map[string]int{}
	counted := func(ctx context.Context, args json.RawMessage) (any, error) {
		info, _ := tools.CallInfoFrom(ctx)
		mu.Lock()
		ran[info.CallID]++
		mu.Unlock()
		return map[string]string{"seen": string(args)}, nil
	}
	startExecutor(t, b, tools.Definition{Type: "function", Name: "note", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}, counted)

	script := filepath.Join(t.TempDir(), "steps.yaml")
	steps := "name: steps\nsteps:\n"
	for i := range 6 {
		steps += fmt.Sprintf("  - calls: [{name: note, arguments: {n: %d}}, {name: note, arguments: {n: %d}}]\n", 2*i, 2*i+1)
	}
	steps += "  - text: all noted\n"
	if err := os.WriteFile(script, []byte(steps), 0o600); err != nil {
		t.Fatal(err)
	}
	startPlanner := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "TOOLFLEET_TEST_PLANNER="+b.srv.URL(), "TOOLFLEET_TEST_SCRIPT="+script)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	// The in-test planner only starts and reads runs; the subprocesses take the steps.
	b.stopPlanner()
	first := startPlanner()
	run, err := b.p.Start(b.ctx, StartRequest{Input: "note twelve things", Tools: []string{"note"}})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the run to reach its third step", func() bool {
		r, err := b.p.Get(b.ctx, run.ID)
		return err == nil && r.Step >= 2
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	second := startPlanner()
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })

	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted || done.Answer != "all noted" {
		t.Fatalf("run ended %s (%s) with %q", done.Termination, done.Detail, done.Answer)
	}
	if len(done.Calls) != 12 {
		t.Fatalf("%d calls recorded, want 12", len(done.Calls))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range done.Calls {
		if c.Status != "ok" || ran[c.ID] != 1 {
			t.Errorf("call %s: status %s, ran %d times", c.ID, c.Status, ran[c.ID])
		}
	}
	if len(ran) != 12 {
		t.Errorf("%d distinct calls ran, want 12", len(ran))
	}
}

// A run whose time runs out while the model is still answering ends as a timeout.
func TestTimeoutDuringModelCall(t *testing.T) {
	b := setup(t, nil)
	m := scriptedModel(t, "steps:\n  - text: too late\n")
	p := b.swapPlanner(t, Config{Models: map[string]provider.Model{"slow": slowModel{m, 10 * time.Second}}})
	run, err := p.Start(b.ctx, StartRequest{Input: "hurry", Limits: Limits{Timeout: tools.Duration(300 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	got, err := p.Wait(wctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Termination != TerminationTimeout {
		t.Fatalf("termination %s (%s), want timeout", got.Termination, got.Detail)
	}
}
