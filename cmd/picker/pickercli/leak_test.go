package pickercli

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
