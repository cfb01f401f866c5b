package toolsfile

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/sandboxtest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A test that kills an executor runs it as a real process: the test binary started
// again with these variables set, and TestMain serves the tools file instead of
// running the tests.
const (
	childURLEnv  = "TOOLFLEET_TEST_EXECUTOR_URL"
	childFileEnv = "TOOLFLEET_TEST_EXECUTOR_TOOLS"
)

// TestMain makes the test binary the fallback sandbox launcher of the command tools it
// runs sandboxed (read-only tools, the sandbox option), and an executor where asked;
// the tests' sandboxed tools start through the launcher program, built for them, as a
// deployed executor's do. It fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	sandbox.Init()
	if file := os.Getenv(childFileEnv); file != "" {
		os.Exit(runChildExecutor(os.Getenv(childURLEnv), file))
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

// runChildExecutor serves the tools of file on the NATS server at url until killed.
func runChildExecutor(url, file string) int {
	err := func() error {
		nc, err := nats.Connect(url)
		if err != nil {
			return err
		}
		specs, err := Load(file)
		if err != nil {
			return err
		}
		reg := tools.NewRegistry()
		if err := Register(reg, specs); err != nil {
			return err
		}
		ex, err := executor.New(nc, reg, executor.WithExecutorID("child"),
			executor.WithStreamConfig(events.Config{Shards: natstest.TestShards()}))
		if err != nil {
			return err
		}
		return ex.Run(context.Background())
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child executor:", err)
		return 1
	}
	return 0
}
