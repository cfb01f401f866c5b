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
	"go.uber.org/goleak"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The crash test runs executors as real subprocesses: the test binary re-executes itself
// with these variables set, and TestMain runs an executor instead of the tests.
const (
	childURLEnv = "TOOLFLEET_TEST_EXECUTOR_URL"
	childLogEnv = "TOOLFLEET_TEST_EXECUTOR_RUNLOG"
	childIDEnv  = "TOOLFLEET_TEST_EXECUTOR_ID"
	// childWorkLogEnv, when set, is a file the child appends each run of "work" to;
	// childNapEnv is how long each call naps (default 5ms); childWindowEnv sets the
	// duplicate window.
	childWorkLogEnv = "TOOLFLEET_TEST_EXECUTOR_WORKLOG"
	childNapEnv     = "TOOLFLEET_TEST_EXECUTOR_NAP"
	childWindowEnv  = "TOOLFLEET_TEST_EXECUTOR_WINDOW"
)

func TestMain(m *testing.M) {
	sandbox.Init() // tests run tools-file command tools; a sandboxed one needs the launcher
	if url := os.Getenv(childURLEnv); url != "" {
		os.Exit(runChildExecutor(url, os.Getenv(childLogEnv), os.Getenv(childIDEnv)))
	}
	// A stop is complete when Run returns: no goroutine of an executor outlives the tests.
	goleak.VerifyTestMain(m)
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
	var workLog *os.File
	if path := os.Getenv(childWorkLogEnv); path != "" {
		if workLog, err = os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	napFor := 5 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv(childNapEnv)); err == nil {
		napFor = d
	}
	cfg := testConfig()
	if d, err := time.ParseDuration(os.Getenv(childWindowEnv)); err == nil {
		cfg.DuplicateWindow = tools.Duration(d)
	}
	reg := tools.NewRegistry()
	nap := func(ctx context.Context) error {
		select {
		case <-time.After(napFor):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err = reg.AddFunc(tools.Definition{Name: "work", Parameters: echoSchema, Safe: true},
		func(ctx context.Context, args json.RawMessage) (any, error) {
			if workLog != nil {
				info, _ := tools.CallInfoFrom(ctx)
				mu.Lock()
				fmt.Fprintln(workLog, info.CallID)
				mu.Unlock()
			}
			return "done", nap(ctx)
		})
	if err == nil {
		err = reg.AddFunc(tools.Definition{Name: "charge", Parameters: echoSchema, Safe: true, Idempotent: new(false)},
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
	ex, err := executor.New(nc, reg, executor.WithStreamConfig(cfg), executor.WithExecutorID(id), executor.WithConcurrency(8))
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

func startChild(t *testing.T, b *testBundle, runLog, id string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childURLEnv+"="+b.srv.URL(), childLogEnv+"="+runLog, childIDEnv+"="+id)
	cmd.Env = append(cmd.Env, env...)
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

// An executor paused (SIGSTOP) with calls in flight, for longer than the ack wait plus
// the duplicate window, then resumed: another replica answered its calls meanwhile, and
// its own late results are refused. Every call has exactly one result, no non-idempotent
// call ran twice, and an idempotent one ran twice only if it was already running when the
// executor stopped.
func TestPausedExecutorAnswersOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess pause test")
	}
	t.Parallel()
	b := setup(t)
	b.cfg.DuplicateWindow = tools.Duration(time.Second)
	must(t, jsutil.Ensure(context.Background(), b.js, b.cfg))
	dir := t.TempDir()
	runLog, workLog := filepath.Join(dir, "charges.log"), filepath.Join(dir, "work.log")
	env := []string{childWorkLogEnv + "=" + workLog, childNapEnv + "=200ms", childWindowEnv + "=1s"}
	a := startChild(t, b, runLog, "a", env...)
	b.waitServed(t, "work")
	b.waitServed(t, "charge")
	var ids []string
	for i := range 40 {
		tool := "work"
		if i%4 == 0 {
			tool = "charge"
		}
		ids = append(ids, fmt.Sprintf("%s%03d", tool, i))
		b.call(t, tool, ids[i], "pause", `{"text":"x"}`)
	}
	time.Sleep(50 * time.Millisecond) // a has taken calls and is running them
	must(t, a.Process.Signal(syscall.SIGSTOP))
	startChild(t, b, runLog, "b", env...)
	b.results.wait(t, 60*time.Second, ids...)
	time.Sleep(time.Duration(b.cfg.AckWait) + 2*time.Second) // past the ack wait and the duplicate window
	must(t, a.Process.Signal(syscall.SIGCONT))
	time.Sleep(3 * time.Second) // a finishes what it was running and publishes its results
	assertOneResultEach(t, b, ids)
	twice := 0
	for id, n := range countLines(t, workLog) {
		if n > 1 {
			twice++
			t.Logf("%s ran %d times (in flight on the paused executor)", id, n)
		}
	}
	if twice > 16 { // two tools, at most 8 calls of each in flight on a
		t.Errorf("%d idempotent calls ran twice; only the ones in flight when the executor paused may", twice)
	}
	for id, n := range countLines(t, runLog) {
		if n > 1 {
			t.Errorf("non-idempotent call %s ran %d times", id, n)
		}
	}
}

// countLines counts each line of the file at path.
func countLines(t *testing.T, path string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return seen
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		seen[sc.Text()]++
	}
	return seen
}
