package mcptool_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a closed Server
// leaves nothing running, not even for a session a call found lost.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
