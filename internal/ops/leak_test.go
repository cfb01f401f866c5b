package ops

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a closed Server
// serves nothing more.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
