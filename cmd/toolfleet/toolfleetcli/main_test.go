package toolfleetcli

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a stop is complete
// when Run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
