package pick

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a scorer beside
// another, a learned index's refresh, a tuning.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
