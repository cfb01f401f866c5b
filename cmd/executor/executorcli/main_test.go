package executorcli

import (
	"os"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// TestMain makes the test binary the sandbox launcher, as cmd/executor's main does, for
// the tools files' command tools that run sandboxed.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}
