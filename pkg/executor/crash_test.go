package executor_test

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The crash test runs executors as real subprocesses: the test binary re-executes itself
// with these variables set, and TestMain runs an executor instead of the tests.
const (
	childURLEnv = "TOOLFLEET_TEST_EXECUTOR_URL"
	childLogEnv = "TOOLFLEET_TEST_EXECUTOR_RUNLOG"
	childIDEnv  = "TOOLFLEET_TEST_EXECUTOR_ID"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(childURLEnv); url != "" {
		os.Exit(runChildExecutor(url, os.Getenv(childLogEnv), os.Getenv(childIDEnv)))
	}
	os.Exit(m.Run())
}

// runChildExecutor serves "work" (idempotent, a few ms) and "charge" (non-idempotent; it
// appends the call id to a run log before it finishes) until killed.
func runChildExecutor(url, runLog, id string) int {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := os.OpenFile(runLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	reg := tools.NewRegistry()
	nap := func(ctx context.Context) error {
		select {
		case <-time.After(5 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err = reg.AddFunc(tools.Definition{Name: "work", Parameters: echoSchema, Safe: true},
		func(ctx context.Context, args json.RawMessage) (any, error) { return "done", nap(ctx) })
	if err == nil {
		err = reg.AddFunc(tools.Definition{Name: "charge", Parameters: echoSchema, Safe: true, Idempotent: tools.Bool(false)},
			func(ctx context.Context, args json.RawMessage) (any, error) {
				info, _ := tools.CallInfoFrom(ctx)
				mu.Lock()
				_, werr := fmt.Fprintln(f, info.CallID)
				mu.Unlock()
				if werr != nil {
					return nil, werr
				}
				return "charged", nap(ctx)
			})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ex, err := executor.New(nc, reg, executor.WithStreamConfig(testConfig()), executor.WithExecutorID(id), executor.WithConcurrency(8))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := ex.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func startChild(t *testing.T, b *testBundle, runLog, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childURLEnv+"="+b.srv.URL(), childLogEnv+"="+runLog, childIDEnv+"="+id)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// Executor processes are killed with SIGKILL in the middle of a load and replaced: every
// call ends with exactly one result, and no non-idempotent call ran twice.
func TestCrashedExecutorsLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	t.Parallel()
	b := setup(t)
	runLog := filepath.Join(t.TempDir(), "charges.log")
	a := startChild(t, b, runLog, "a")
	startChild(t, b, runLog, "b")
	b.waitServed(t, "work")
	b.waitServed(t, "charge")

	n := 1200
	ids := make([]string, n)
	for i := range n {
		tool := "work"
		if i%3 == 0 {
			tool = "charge"
		}
		ids[i] = fmt.Sprintf("%s%05d", tool, i)
		b.call(t, tool, ids[i], "crash", `{"text":"x"}`)
		if i == n/3 {
			must(t, a.Process.Signal(syscall.SIGKILL))
		}
		if i == 2*n/3 {
			startChild(t, b, runLog, "c")
		}
	}
	res := b.results.wait(t, 60*time.Second, ids...)
	assertOneResultEach(t, b, ids)
	interrupted := 0
	for _, id := range ids {
		r := res[id]
		switch {
		case r.Status == events.StatusOK:
		case r.Status == events.StatusInterrupted && strings.HasPrefix(id, "charge"):
			interrupted++
		default:
			t.Errorf("%s: %+v %+v", id, r, r.Error)
		}
	}
	f, err := os.Open(runLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		seen[sc.Text()]++
	}
	for id, c := range seen {
		if c > 1 {
			t.Errorf("non-idempotent call %s ran %d times", id, c)
		}
	}
	t.Logf("%d calls, %d non-idempotent calls interrupted by the crash", n, interrupted)
}
