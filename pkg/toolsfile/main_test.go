package toolsfile

import (
	"os"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// TestMain makes the test binary the sandbox launcher of the command tools it runs
// sandboxed (read-only tools, the sandbox option).
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}
