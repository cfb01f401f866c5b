package executorcli

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// TestMain makes the test binary the sandbox launcher, as cmd/executor's main does, for
// the tools files' command tools that run sandboxed, and fails the package's tests when
// a goroutine outlives them: an executor handed over stops for good.
func TestMain(m *testing.M) {
	sandbox.Init()
	goleak.VerifyTestMain(m)
}
