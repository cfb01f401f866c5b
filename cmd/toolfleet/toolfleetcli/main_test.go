package toolfleetcli

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// TestMain makes the test binary the sandbox launcher of the command tools a dev fleet
// runs (-tools-file), as cmd/toolfleet's main does, and fails the package's tests when a
// goroutine outlives them: a stop is complete when Run returns.
func TestMain(m *testing.M) {
	sandbox.Init()
	goleak.VerifyTestMain(m)
}
